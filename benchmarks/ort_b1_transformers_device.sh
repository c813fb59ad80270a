#!/usr/bin/env bash
# ViT-B/16 and BERT-base at batch 1 on onnxruntime-cuda (defaults) against the independent ORT loop whose
# back-to-back runs are queued (reference_ort_iobinding.py with gpu_graph_id, issue 42), in one short call after
# the ORT parts are staged (ort_gpu_on_device.sh). Every step writes straight into $OUT, so a call cut short still
# returns what ran:
#   bash benchmarks/ort_b1_transformers_device.sh        (MODELS="vit_b16" for one; carry .whl and the last part)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/ort_gpu_on_device.sh"
OUT=${OUT:-$PWD/ort-b1-out}
W=/tmp/ortw
mkdir -p "$W" "$OUT"
export PYTHONUNBUFFERED=1
eng() { ls "$W"/engines/$1.$2.onnxruntime-cuda.*.onnx | head -1; }
for m in ${MODELS:-vit_b16 bert_base}; do
  timeout 90 python3 "$HERE/export_zoo_models.py" "$W" "$m" >/dev/null 2>&1
  python3 -m trtprof build --backend onnxruntime-cuda --engines "$W/engines" --fp32 --fp16 --batch-sizes 1 "$W/$m.onnx" | tail -1
  timeout 90 python3 -m trtprof compare "$W/$m.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
    --precisions fp32,fp16 --batch-sizes 1 --out "$OUT/$m-b1.json" > "$OUT/$m-b1.txt" 2>&1
  grep -E "^batch 1: fp16|rror" "$OUT/$m-b1.txt" | head -3
  timeout 90 python3 "$HERE/reference_ort_iobinding.py" --sessions 3 --iters 150 --batch-sizes 1 \
    --out "$OUT/$m-b1-ref-ort.json" "$(eng "$m" fp32):fp32" "$(eng "$m" fp16):fp16" 2>&1 | grep pooled
done
