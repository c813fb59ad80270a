#!/usr/bin/env bash
# Per-node GPU kernel times on onnxruntime-cuda (CUPTI through cupti-python, layers.ort_kernels) checked on the
# GPU machine against Kineto (benchmarks/reference_ort_kernels_kineto.py, imports nothing from trtprof), in one
# short call after the ORT parts are staged (ort_gpu_on_device.sh). Steps write straight into $OUT, most
# telling first, so a call cut short still returns what ran:
#   bash benchmarks/ort_kernels_device.sh   (carry .whl with the cp312 wheels of cupti-python 13.0 and cxxfilt,
#                                            and the last ORT part)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/ort_gpu_on_device.sh"
OUT=${OUT:-$PWD/ort-kernels-out}
W=/tmp/kw
mkdir -p "$W" "$OUT"
export PYTHONUNBUFFERED=1
quiet() { grep -v "cudnn_fe_call\|No execution plans"; }
eng() { ls "$W"/e/$1.$2.onnxruntime-cuda.*.onnx | head -1; }
python3 -c "import onnxruntime as o; from cupti import cupti; print('ort', o.__version__, o.get_available_providers())"
python3 models/conv_elu.py "$W" >/dev/null
M=report_conv_elu_k32_256
python3 -m trtprof build --backend onnxruntime-cuda --engines "$W/e" --fp32 --fp16 --batch-sizes 10,256 "$W/$M.onnx" | tail -1
for b in 10 256; do
  /usr/bin/time -f "wall %e s" python3 -m trtprof profile "$W/$M.onnx" --backend onnxruntime-cuda --engines "$W/e" \
    --precisions fp32,fp16 --batch-size $b --out "$OUT/kprofile-$M-b$b.json" > "$OUT/kprofile-$M-b$b.txt" 2>&1
  echo "profile b$b rc=$?"; [ $b = 10 ] && head -40 "$OUT/kprofile-$M-b$b.txt"
  python3 "$HERE/reference_ort_kernels_kineto.py" --batch $b --out "$OUT/kineto-$M-b$b.json" \
    "$(eng $M fp32):fp32" "$(eng $M fp16):fp16" 2>&1 | quiet
  python3 "$HERE/reference_ort_kernels_kineto.py" --compare "$OUT/kineto-$M-b$b.json" \
    --trtprof "$OUT/kprofile-$M-b$b.json" 2>&1 | tee "$OUT/kcheck-$M-b$b.txt"
done
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/layers/test_ort_kernels_gpu.py > "$OUT/gpu-test.txt" 2>&1
tail -2 "$OUT/gpu-test.txt"
/usr/bin/time -f "wall %e s" python3 -m trtprof compare "$W/$M.onnx" --backend onnxruntime-cuda --engines "$W/e" \
  --precisions fp32,fp16 --batch-sizes 10 --layers --time-budget-s 10 --out "$OUT/kreport-why.json" > "$OUT/kreport-why.txt" 2>&1
grep -iE "why|slower|nchw|speedup|VALID|wall|rror" "$OUT/kreport-why.txt" | head -20
