#!/usr/bin/env bash
# Packs what a GPU call needs from outside the GPU machine's image, run HERE (this machine reaches PyPI; the GPU
# machine reaches nothing): onnxruntime-gpu in six parts under 64 MiB with the tracked tree (one part per call
# into /tmp/parts there: benchmarks/ort_gpu_on_device.sh joins them; four parts of 49 MB stopped fitting once the
# tree reached 15.6 MB, 2026-12-04), and the small wheels into .whl/.
# The GPU machine's python3 is 3.12: the wheels are cp312 whatever this machine runs.
#   bash benchmarks/pack_ort_gpu.sh            (about 5 minutes on 2 cores: xz -9e of the CUDA provider)
# then carry .ortgpu0 … .ortgpu3 (one a call, in that order) and .whl; both are listed in .git/info/exclude here.
set -euo pipefail
cd "$(dirname "$0")/.."
ORT=${ORT_VERSION:-1.31.1}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pip312() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$1" "${@:2}"; }
pip312 "$T" "onnxruntime-gpu==$ORT"
mkdir -p .whl
pip312 .whl cupti-python==13.0.1 cxxfilt onnxconverter-common onnx2torch==1.5.15
mkdir "$T/un" && (cd "$T/un" && unzip -q "$T"/onnxruntime_gpu-*.whl)
rm -f "$T"/un/onnxruntime/capi/libonnxruntime_providers_tensorrt.so  # no TensorRT there
xz -9e -T0 -c "$T/un/onnxruntime/capi/libonnxruntime_providers_cuda.so" > "$T/cuda.so.xz"
rm "$T/un/onnxruntime/capi/libonnxruntime_providers_cuda.so"
tar -C "$T/un" -cJf "$T/rest.tar.xz" .
tar -C "$T" -cf "$T/ortgpu.tar" cuda.so.xz rest.tar.xz
split -n 6 -d "$T/ortgpu.tar" "$T/p"
for i in 0 1 2 3 4 5; do rm -rf ".ortgpu$i" && mkdir ".ortgpu$i" && mv "$T/p0$i" ".ortgpu$i/"; done
grep -qx '/.ortgpu\*/' .git/info/exclude || echo '/.ortgpu*/' >> .git/info/exclude
grep -qx '/.whl/' .git/info/exclude .gitignore || echo '/.whl/' >> .git/info/exclude
ls -la .ortgpu*/ .whl/
