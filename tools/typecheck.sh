#!/usr/bin/env bash
# Static check of the TensorRT backend against NVIDIA's API, where TensorRT cannot be installed.
#   bash tools/typecheck.sh            (uses $PYTHON, else python3)
# Installs mypy, and tensorrt-stubs into the git-ignored .stubs/ (NOT into the environment: the stubs
# ship a `tensorrt/` folder that would make `import tensorrt` succeed as an empty namespace package),
# patches them (tools/patch_tensorrt_stubs.sh says why), and runs mypy. Exits non-zero on errors.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
STUBS_VERSION=10.13.0.35.1
if ! "$PY" -m mypy --version >/dev/null 2>&1; then
  "$PY" -m pip install --quiet mypy
fi
if [ ! -f ".stubs/pkg/.version-$STUBS_VERSION" ]; then
  rm -rf .stubs/pkg
  "$PY" -m pip install --quiet --no-deps --target .stubs/pkg "tensorrt-stubs==$STUBS_VERSION"
  touch ".stubs/pkg/.version-$STUBS_VERSION"
fi
sh tools/patch_tensorrt_stubs.sh .stubs/pkg .stubs >/dev/null
"$PY" -m mypy --config-file tools/mypy-tensorrt.ini trtprof/backends/tensorrt/
