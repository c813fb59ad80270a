#!/bin/bash
# trtprof compare on the torch backend with explicit --time-budget-s, on architectures nobody here wrote and
# on ResNet-50 beside an independent plain-PyTorch loop (issue 33, first day on the H200, 2026-12-01; named
# gpu_issue33.sh before issue 41). Run from the repository root on the device machine; wheels in ../.whl or .whl.
# Part A: models, the independent reference, load phases, ResNet-50 compare (defaults: CUDA graphs)
# with a timeline, ViT-B/16 and BERT-base fp16. Part B: three timm CNNs, ResNet-50 --eager and the
# A/A and the report's net. Results under $OUT/r (tarred by the caller).
set -u
PART=${1:-A}
R=${OUT:-/tmp/out}/r; mkdir -p "$R"; M=/tmp/m; E=/tmp/e; BUDGET=${BUDGET:-36}
export PYTHONUNBUFFERED=1
py() { python3 "$@"; }
tp() { local name=$1; shift; local t0=$SECONDS; timeout ${TO:-200} python3 -m trtprof "$@" >"$R/$name.txt" 2>&1; local rc=$?;
       echo "$name rc=$rc wall=$((SECONDS - t0)) s" | tee -a "$R/summary.txt"; grep -E "^batch|rc=|Error|error:" "$R/$name.txt" | head -20; }
tl() { local name=$1; shift; local t0=$SECONDS; timeout ${TO:-200} python3 benchmarks/compare_timeline.py "$@" >"$R/$name.txt" 2>&1; local rc=$?;
       echo "$name rc=$rc wall=$((SECONDS - t0)) s" | tee -a "$R/summary.txt"; grep -E "^batch" "$R/$name.txt" | head -20; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$R/nvidia-smi-$PART.txt"
date -u >>"$R/summary.txt"
if [ "$PART" = A ]; then
  py benchmarks/export_zoo_models.py $M resnet50 vit_b16 bert_base 2>&1 | tail -4
  py benchmarks/reference_resnet50_graph.py --out "$R/reference_copies.json" 2>&1 | tee "$R/reference_copies.txt"
  timeout 120 python3 -m trtprof build --backend torch --fp32 --tf32 --fp16 $M/resnet50.onnx --engines $E/r50 --batch-sizes 1,32,256 >"$R/build_r50.txt" 2>&1; echo "build r50 rc=$?" | tee -a "$R/summary.txt"
  timeout 120 python3 benchmarks/torch_load_phases.py $E/r50 --out "$R/load_phases.json" >"$R/load_phases.txt" 2>&1; cat "$R/load_phases.txt"
  TO=200 tl r50_defaults compare $M/resnet50.onnx --backend torch --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --time-budget-s $BUDGET --engines $E/r50 --out "$R/r50_defaults.json"
  TO=150 tp vit_b16 compare $M/vit_b16.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --time-budget-s 24 --engines $E/vit --out "$R/vit_b16.json"
  TO=150 tp bert_base compare $M/bert_base.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --time-budget-s 24 --engines $E/bert --out "$R/bert_base.json"
else
  py benchmarks/export_zoo_models.py $M resnet50 bert_base efficientnet_b0 convnext_tiny mobilenetv3_large 2>&1 | grep exported
  TO=100 tp bert_base compare $M/bert_base.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --time-budget-s 16 --engines $E/bert --out "$R/bert_base.json"
  for m in efficientnet_b0 convnext_tiny mobilenetv3_large; do
    TO=80 tp $m compare $M/$m.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --time-budget-s 12 --engines $E/$m --out "$R/$m.json"
  done
  timeout 120 python3 -m trtprof build --backend torch --fp32 --tf32 --fp16 $M/resnet50.onnx --engines $E/r50 --batch-sizes 1,32,256 >"$R/build_r50.txt" 2>&1
  timeout 90 python3 benchmarks/torch_load_phases.py $E/r50 --out "$R/load_phases.json" >"$R/load_phases.txt" 2>&1; cat "$R/load_phases.txt"
  TO=90 tl r50_aa compare $M/resnet50.onnx --backend torch --precisions fp16,fp16 --batch-sizes 1,32,256 --time-budget-s 12 --engines $E/r50 --out "$R/r50_aa.json"
fi
