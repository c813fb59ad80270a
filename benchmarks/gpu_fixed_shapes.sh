#!/bin/bash
# Issue 43 on the GPU (not yet run: written on a CPU-only machine with the fold, see
# benchmarks/results/fold_shapes-cpu-2026-12-02): the torch backend at fixed shapes on ViT-B/16 (timm) and
# BERT-base (transformers), defaults, batch 1 and 64 — each build's notes must say, per batch size,
# "shapes fixed at … and folded" and "torch.export program saved", and no compare arm may run eager
# ("CUDA graph capture failed" / "torch.export could not capture" are what issue 43 measured before);
# then ResNet-50 with defaults (must be unchanged: its graph has no shape arithmetic, same engine key),
# and the gpu-marked tests. Run from the repository root on the device machine, one part a call (each fits
# the 10-minute limit; the exports and engines stay in /tmp between calls of one warm machine):
#     OUT=/tmp/out bash benchmarks/gpu_fixed_shapes.sh build     # export, build both at 1,64, fixed_shapes.txt
#     OUT=/tmp/out bash benchmarks/gpu_fixed_shapes.sh vit       # compare ViT-B/16 fp32,fp16 at 1,64 (defaults)
#     OUT=/tmp/out bash benchmarks/gpu_fixed_shapes.sh bert      # the same for BERT-base
#     OUT=/tmp/out bash benchmarks/gpu_fixed_shapes.sh r50       # ResNet-50 defaults, then the gpu tests
#     OUT=/tmp/out bash benchmarks/gpu_fixed_shapes.sh census    # BERT-base's kernels: trtprof vs transformers
#     OUT=/tmp/out bash benchmarks/gpu_fixed_shapes.sh more-build   # export and build Swin-T, MobileViT-S, GPT-2, DeiT-S
#     OUT=/tmp/out bash benchmarks/gpu_fixed_shapes.sh more         # compare each of them, fp32,fp16 at 1,32
# MODELS="vit_b16 bert_base" (build) and MORE="swin_tiny mobilevit_s gpt2 deit_small" choose the models.
# Results under $OUT/r: one .txt per step, summary.txt (rc and wall time), the compare JSONs, the
# engine JSONs' fixed_shapes (fixed_shapes.txt).
set -u
PART=${1:-build}
R=${OUT:-/tmp/out}/r; mkdir -p "$R"; M=/tmp/m; E=/tmp/e
export PYTHONUNBUFFERED=1
tp() { local name=$1; shift; local t0=$SECONDS; timeout ${TO:-300} python3 -m trtprof "$@" >"$R/$name.txt" 2>&1; local rc=$?;
       echo "$name rc=$rc wall=$((SECONDS - t0)) s" | tee -a "$R/summary.txt";
       grep -E "^batch|VALID|rc=|Error|error:|eager|capture|folded|torch.export|still on the host" "$R/$name.txt" | head -30; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$R/nvidia-smi.txt"
date -u >>"$R/summary.txt"
MORE=${MORE:-swin_tiny mobilevit_s gpt2 deit_small}
fixed_shapes() { python3 - "$1" >>"$R/fixed_shapes.txt" <<'EOF'
import json, sys
from pathlib import Path
for meta in sorted(Path(sys.argv[1]).glob("*.json")):
    data = json.loads(meta.read_text())
    backend = data.get("backend_metadata", {})
    print(meta.name, backend.get("module_loaded_by"), json.dumps(backend.get("fixed_shapes", backend.get("fixed_shapes_note"))))
EOF
}
if [ "$PART" = more-build ]; then
python3 benchmarks/export_zoo_models.py $M $MORE 2>&1 | grep -E "exported|failed" | tee -a "$R/summary.txt"
for m in $MORE; do
  [ -f $M/$m.onnx ] || continue
  TO=200 tp build_$m build --backend torch --fp32 --fp16 $M/$m.onnx --engines $E/$m --batch-sizes 1,32
  fixed_shapes "$E/$m"
done
elif [ "$PART" = more ]; then
for m in $MORE; do
  [ -d $E/$m ] || continue
  TO=${TOC:-170} tp compare_$m compare $M/$m.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,32 --engines $E/$m --out "$R/compare_$m.json"
done
elif [ "$PART" = census ]; then
for spec in "fp16 64" "fp32 64" "fp16 1"; do set -- $spec
  timeout 120 python3 benchmarks/torch_kernel_census.py $E/${BERT:-bert_base} --model bert_base --precision $1 --batch $2 \
    >"$R/census_bert_$1_b$2.txt" 2>&1; echo "census bert $1 b$2 rc=$?" | tee -a "$R/summary.txt"
  head -14 "$R/census_bert_$1_b$2.txt"
done
elif [ "$PART" = build ]; then
python3 benchmarks/export_zoo_models.py $M resnet50 ${MODELS:-vit_b16 bert_base} 2>&1 | grep exported
for m in ${MODELS:-vit_b16 bert_base}; do
  TO=400 tp build_$m build --backend torch --fp32 --fp16 $M/$m.onnx --engines $E/$m --batch-sizes 1,64
  fixed_shapes "$E/$m"
done
cat "$R/fixed_shapes.txt"
elif [ "$PART" = vit ] || [ "$PART" = bert ]; then
  m=vit_b16; [ "$PART" = bert ] && m=${BERT:-bert_base}
  TO=560 tp compare_$m compare $M/$m.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --engines $E/$m --out "$R/compare_$m.json"
elif [ "$PART" = r50 ]; then
TO=300 tp compare_r50 compare $M/resnet50.onnx --backend torch --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --engines $E/r50 --out "$R/compare_r50.json"
timeout 250 python3 -m pytest -q -p no:cacheprovider -m gpu tests >"$R/gpu_tests.txt" 2>&1; tail -3 "$R/gpu_tests.txt"
fi
