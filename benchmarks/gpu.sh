#!/usr/bin/env bash
# GPU benchmark of jaxsim against MJX (benchmarks/gpu.py says what it measures), for a machine with
# JAX (CUDA) and Python 3.12 preinstalled and no network:
#
#   bash benchmarks/gpu.sh [--budget 500] [--models cheetah hopper ...] [--no-suite]
#
# What it installs comes from .gpu/ at the checkout's root (ignored by git; made on a machine with
# network by `bash benchmarks/gpu_prepare.sh`, and carried along, e.g. the device tool's
# `run(command='bash benchmarks/gpu.sh', carry=['.gpu'])`):
#   .gpu/wheels/*.whl   mujoco 3.17.0, mujoco-mjx 3.17.0, xmltodict, trimesh (cp312, manylinux)
#   .gpu/suite.tgz      dm_control's suite XMLs with their assets
# Nothing is installed where `import mujoco.mjx, xmltodict` already works ($PYTHON, default
# python3). The table is printed, and written to out/gpu/ and $OUT, whatever fails.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import mujoco.mjx, xmltodict' >/dev/null 2>&1; then
  if ls .gpu/wheels/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/jaxsim-site .gpu/wheels/*.whl || echo 'gpu.sh: installing the wheels failed'
    export PYTHONPATH=/tmp/jaxsim-site${PYTHONPATH:+:$PYTHONPATH}
  else
    echo 'gpu.sh: no .gpu/wheels/*.whl and no mujoco.mjx: MJX and the in-contact states will fail'
  fi
fi
if [ -z "${JAXSIM_SUITE_DIR:-}" ] && ! "$PY" -c 'import dm_control' >/dev/null 2>&1; then
  if [ -f .gpu/suite.tgz ]; then
    mkdir -p /tmp/jaxsim-suite && tar xzf .gpu/suite.tgz -C /tmp/jaxsim-suite
    export JAXSIM_SUITE_DIR=/tmp/jaxsim-suite
  else
    echo 'gpu.sh: no .gpu/suite.tgz and no dm_control: the suite models will be missing'
  fi
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
exec "$PY" benchmarks/gpu.py "$@"
