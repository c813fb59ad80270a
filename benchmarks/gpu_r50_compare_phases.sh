#!/bin/bash
# Where a ResNet-50 compare's time goes on the GPU (compare_timeline.py's phases; issue 33, helper H8; named
# gpu_issue33_h8.sh before issue 41): where it goes once the parent's accuracy pass is done by
# load 0's worker (no engine loaded in the parent), and what ran beside the timed rounds. Run on the H200
# from the repository root, on the tree to measure (TAG names it: "before" on main without h8, "after" with it):
#   OUT=$OUT bash benchmarks/gpu_r50_compare_phases.sh after
# The same command as benchmarks/gpu_archs_explicit_budget.sh part A's r50_defaults (torchvision ResNet-50, torch backend,
# fp32,tf32,fp16, batch 1,32,256, --time-budget-s 36, cached engines), whose timeline on 2026-12-01 gave
# load_reference 24.0 s of 104.5 s (benchmarks/results/gpu_issue33-H200-2026-12-01/README.md).
set -u
TAG=${1:-after}
R=${OUT:-/tmp/out}/h8; mkdir -p "$R"; M=/tmp/m; E=/tmp/e; BUDGET=${BUDGET:-36}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
[ -f $M/resnet50.onnx ] || python3 benchmarks/export_zoo_models.py $M resnet50 2>&1 | tail -2
timeout 150 python3 -m trtprof build --backend torch --fp32 --tf32 --fp16 $M/resnet50.onnx --engines $E/r50 \
  --batch-sizes 1,32,256 >"$R/build_r50-$TAG.txt" 2>&1; echo "build rc=$?"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$R/nvidia-smi-$TAG.txt"
t0=$SECONDS
timeout 300 python3 benchmarks/compare_timeline.py compare $M/resnet50.onnx --backend torch --precisions fp32,tf32,fp16 \
  --batch-sizes 1,32,256 --time-budget-s $BUDGET --engines $E/r50 --out "$R/r50_timeline-$TAG.json" >"$R/r50_timeline-$TAG.txt" 2>&1
echo "compare rc=$? wall=$((SECONDS - t0)) s" | tee -a "$R/r50_timeline-$TAG.txt"
grep -E "^batch|load_reference|facts|outputs|first timed|beside the timing|start-up|accuracy pass|range analysis" "$R/r50_timeline-$TAG.txt"
