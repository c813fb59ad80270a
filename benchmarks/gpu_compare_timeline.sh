#!/bin/bash
# Issue 35 (compare --timeline) on the H200: run from the repository root on the device machine, with
# the environment the other GPU scripts use (gpu_archs_explicit_budget.sh). Results under $OUT/r.
#  1. ResNet-50 (torchvision, random weights) b1 fp32,fp16 `compare --timeline --trace-dir` on the torch
#     backend, CUDA-graph replay (compare's default) and --eager, then `trtprof report` of each;
#  2. what the timeline costs where it runs (benchmarks/timeline_cost.py: the parent path trtprof takes
#     against the recording alone, what a worker command after its last round would cost), graph and eager;
#  3. the gpu-marked tests of the torch path (tests/compare/test_compare_timeline_gpu.py).
# About 4-6 minutes; each step has its own timeout.
set -u
R=${OUT:-/tmp/out}/r; mkdir -p "$R"; M=/tmp/m; E=/tmp/e/r50; mkdir -p $M
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
step() { local name=$1 to=$2; shift 2; local t0=$SECONDS; timeout "$to" "$@" >"$R/$name.txt" 2>&1; local rc=$?;
         echo "$name rc=$rc wall=$((SECONDS - t0)) s" | tee -a "$R/summary.txt"; grep -E "^batch|^timeline:|^trace:|error" "$R/$name.txt" | head -20; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$R/nvidia-smi.txt"
date -u >>"$R/summary.txt"
[ -f $M/resnet50.onnx ] || python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from pathlib import Path; from gpu_fidelity import MAKERS; MAKERS['resnet50'](Path('$M/resnet50.onnx'))"
for mode in graph eager; do
  flag=--cuda-graph; [ $mode = eager ] && flag=--eager
  mkdir -p "$R/r50-b1-$mode"
  step compare_$mode 240 python3 -m trtprof compare $M/resnet50.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1 \
       --time-budget-s 40 --engines $E --out "$R/r50-b1-$mode/compare.json" --timeline --trace-dir "$R/r50-b1-$mode/traces" $flag
  step report_$mode 60 python3 -m trtprof report "$R/r50-b1-$mode/compare.json" -o "$R/r50-b1-$mode/report.html"
  cflag=; [ $mode = graph ] && cflag=--cuda-graph
  step cost_$mode 120 python3 benchmarks/timeline_cost.py $M/resnet50.onnx --backend torch --batch-size 1 --engines $E \
       --repeats 3 $cflag --out "$R/timeline_cost-H200-torch-$mode.json"
  tail -3 "$R/cost_$mode.txt"
done
step gpu_tests 300 python3 -m pytest tests/compare/test_compare_timeline_gpu.py -q -rs
tail -3 "$R/gpu_tests.txt"
