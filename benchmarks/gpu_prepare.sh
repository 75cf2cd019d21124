#!/usr/bin/env bash
# Fills .gpu/ (ignored by git) with what benchmarks/gpu.sh installs on a GPU machine without
# network: the wheels for its Python (3.12, x86-64 manylinux) and dm_control's suite models.
# Run once on a machine with network and dm_control (the project's test venv), from anywhere:
#
#   bash benchmarks/gpu_prepare.sh [PYTHON_WITH_DM_CONTROL]     # default .venv/bin/python
set -eu
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
mkdir -p .gpu/wheels
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .gpu/wheels \
  mujoco==3.17.0 mujoco-mjx==3.17.0 xmltodict==1.0.4 trimesh==5.2.0
suite=$("$PY" -c 'import dm_control, os; print(os.path.join(os.path.dirname(dm_control.__file__), "suite"))')
tar czf .gpu/suite.tgz -C "$suite" $(cd "$suite" && ls *.xml common/*.xml) dog_assets
ls -la .gpu/wheels .gpu/suite.tgz
du -sh .gpu
