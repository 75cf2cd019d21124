#!/usr/bin/env bash
# GPU benchmark of jaxsim against MJX (benchmarks/gpu.py says what it measures), for a machine with
# JAX (CUDA) and Python 3.12 preinstalled and no network:
#
#   bash benchmarks/gpu.sh [--budget 500] [--models cheetah hopper ...] [--no-suite]
#
# With --soak first it runs benchmarks/soak.py instead (issue 36's long float32 runs, on the GPU;
# the rest of the arguments are soak.py's), e.g. the models a 2-core CPU cannot soak for 10,000
# steps in a session, within 500 s:
#
#   bash benchmarks/gpu.sh --soak --models stacker manipulator quadruped humanoid_CMU dog \
#     humanoid models/walker.xml --steps 10000 --chunk 1000 --total-budget 500
#
# C MuJoCo there is the wheel's 3.17.0 (MJX's pair), on 16 of the worlds: the counts compare, the
# trajectories are not expected to.
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
if [ "${1:-}" = "--soak" ]; then
  shift
  dest=${OUT:-out/gpu}
  mkdir -p "$dest"
  exec "$PY" benchmarks/soak.py --out "$dest/soak.md" "$@"
fi
exec "$PY" benchmarks/gpu.py "$@"
