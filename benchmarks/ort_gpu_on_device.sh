#!/usr/bin/env bash
# Source this on the GPU machine: puts onnxruntime-gpu (carried in parts, see ../shared/FACTS.md and
# benchmarks/README.md) first on PYTHONPATH, and the small wheels of .whl/ (onnxconverter-common, onnx2torch)
# into /tmp/site. Parts: /tmp/parts/p00..p05 (one carried per call, from `split -n 6` of a tar holding
# cuda.so.xz, the CUDA provider library, and rest.tar.xz, the wheel's other files without TensorRT's EP).
set -e
if [ ! -d /tmp/ortgpu/onnxruntime ]; then
  mkdir -p /tmp/ortgpu
  cat /tmp/parts/p0* > /tmp/ortgpu.tar
  tar -C /tmp/ortgpu -xf /tmp/ortgpu.tar
  tar -C /tmp/ortgpu -xJf /tmp/ortgpu/rest.tar.xz
  xz -d -T0 -c /tmp/ortgpu/cuda.so.xz > /tmp/ortgpu/onnxruntime/capi/libonnxruntime_providers_cuda.so
  chmod +x /tmp/ortgpu/onnxruntime/capi/libonnxruntime_providers_cuda.so
  rm -f /tmp/ortgpu/cuda.so.xz /tmp/ortgpu/rest.tar.xz /tmp/ortgpu.tar
fi
if [ -d .whl ] && [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/ortgpu:/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
set +e
