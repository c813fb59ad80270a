#!/bin/bash
# trtprof compare on the torch backend with its DEFAULTS (no --time-budget-s), on ResNet-50 beside an
# independent loop and on architectures nobody here wrote, plus GPU A/A, a serving run, kill -9 of a worker
# and compare --timeline (issues 33-36 on the H200, 2026-12-02; named gpu_issue33_c.sh before issue 41).
# Run from the repository root on the device machine, wheels in .whl.
# Parts G/H/T: the third day's calls (see each). Part C: the torch.export artifact (build time, load phases: saved program vs conversion), the ResNet-50
# compare with DEFAULTS (no --time-budget-s: the default budget policy) under compare_timeline, ViT-B/16
# and BERT-base with defaults, BERT's build failure with --debug (the traceback names the op), and the
# in-process eager/graph load agreement at batch 32 (deliverable 2). Part D: A/A runs, timm models, GPU tests.
# Results under $OUT/r (tarred by the caller).
set -u
PART=${1:-C}
R=${OUT:-/tmp/out}/r; mkdir -p "$R"; M=/tmp/m; E=/tmp/e
export PYTHONUNBUFFERED=1
tp() { local name=$1; shift; local t0=$SECONDS; timeout ${TO:-200} python3 -m trtprof "$@" >"$R/$name.txt" 2>&1; local rc=$?;
       echo "$name rc=$rc wall=$((SECONDS - t0)) s" | tee -a "$R/summary.txt"; grep -E "^batch|VALID|rc=|Error|error:|budget|loads" "$R/$name.txt" | head -24; }
tl() { local name=$1; shift; local t0=$SECONDS; timeout ${TO:-200} python3 benchmarks/compare_timeline.py "$@" >"$R/$name.txt" 2>&1; local rc=$?;
       echo "$name rc=$rc wall=$((SECONDS - t0)) s" | tee -a "$R/summary.txt"; grep -E "^batch|VALID|budget" "$R/$name.txt" | head -24; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$R/nvidia-smi-$PART.txt"
date -u >>"$R/summary.txt"
if [ "$PART" = C ]; then
  python3 benchmarks/export_zoo_models.py $M resnet50 vit_b16 bert_base 2>&1 | grep exported
  TO=150 tp build_r50 build --backend torch --fp32 --tf32 --fp16 $M/resnet50.onnx --engines $E/r50 --batch-sizes 1,32,256
  timeout 120 python3 benchmarks/torch_load_phases.py $E/r50 --out "$R/load_phases.json" >"$R/load_phases.txt" 2>&1; cat "$R/load_phases.txt"
  TO=150 tl r50_defaults compare $M/resnet50.onnx --backend torch --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --engines $E/r50 --out "$R/r50_defaults.json"
  TO=100 tp bert_debug --debug build --backend torch --fp32 $M/bert_base.onnx --engines $E/bert --batch-sizes 1,64
  tail -40 "$R/bert_debug.txt"
  TO=150 tp vit_b16 compare $M/vit_b16.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --engines $E/vit --out "$R/vit_b16.json"
  TO=60 tp r50_inproc_graph compare $M/resnet50.onnx --backend torch --precisions fp32,tf32 --batch-sizes 32 --in-process --time-budget-s 15 --engines $E/r50 --out "$R/r50_inproc_graph.json"
  TO=60 tp r50_inproc_eager compare $M/resnet50.onnx --backend torch --precisions fp32,tf32 --batch-sizes 32 --in-process --eager --time-budget-s 15 --engines $E/r50 --out "$R/r50_inproc_eager.json"
elif [ "$PART" = D ]; then
  # the default ResNet-50 run (accuracy from the workers), GPU A/A x6, the report's net, a NOT VALID run
  python3 benchmarks/export_zoo_models.py $M resnet50 2>&1 | grep exported
  python3 -c "import sys; sys.path.insert(0, 'models'); import conv_elu; conv_elu.make_onnx('report_conv_elu_k32_256', '$M/report.onnx')"
  TO=150 tp build_r50 build --backend torch --fp32 --tf32 --fp16 $M/resnet50.onnx --engines $E/r50 --batch-sizes 1,32,256
  TO=240 tl r50_defaults compare $M/resnet50.onnx --backend torch --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --engines $E/r50 --out "$R/r50_defaults.json"
  for i in 1 2 3 4 5 6; do
    TO=60 tp r50_aa_$i compare $M/resnet50.onnx --backend torch --precisions fp16,fp16 --batch-sizes 1,32,256 --time-budget-s ${AA_BUDGET:-6} --engines $E/r50 --out "$R/r50_aa_$i.json"
  done
  TO=120 tp report_net compare $M/report.onnx --backend torch --precisions fp32,fp16 --batch-sizes 10,256 --no-copies --engines $E/report --out "$R/report_net.json"
  # NOT VALID on purpose: a second process keeps the GPU busy (a matmul loop) during a compare
  python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda'); t = time.time()
while time.time() - t < 40: a = (a @ a).clamp_(-1, 1)
" & BUSY=$!
  sleep 4
  TO=60 tp r50_busy compare $M/resnet50.onnx --backend torch --precisions fp32,fp16 --batch-sizes 32 --time-budget-s 12 --engines $E/r50 --out "$R/r50_busy.json"
  kill $BUSY 2>/dev/null; wait $BUSY 2>/dev/null
  # issue 35: compare --timeline at batch 1, graph replay (the default) and --eager, and their pages
  for mode in graph eager; do
    flag=; [ $mode = eager ] && flag=--eager
    mkdir -p "$R/r50-b1-$mode"
    TO=90 tp r50_timeline_$mode compare $M/resnet50.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1 --time-budget-s 8 $flag --timeline --trace-dir "$R/r50-b1-$mode/traces" --engines $E/r50 --out "$R/r50-b1-$mode/compare.json"
    grep -E "^timeline|^trace" "$R/r50_timeline_$mode.txt" | head -5
    TO=60 tp r50_timeline_report_$mode report "$R/r50-b1-$mode/compare.json" -o "$R/r50-b1-$mode/report.html"
  done
elif [ "$PART" = F ]; then
  # final head: BERT-base (the Flatten fix), the ResNet-50 default run (the budget that grows where the
  # start-up took the window), the gpu-marked tests, then three timm models with defaults
  python3 benchmarks/export_zoo_models.py $M bert_base resnet50 efficientnet_b0 convnext_tiny mobilenetv3_large 2>&1 | grep exported
  TO=130 tp bert_base compare $M/bert_base.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --engines $E/bert --out "$R/bert_base.json"
  TO=150 tp build_r50 build --backend torch --fp32 --tf32 --fp16 $M/resnet50.onnx --engines $E/r50 --batch-sizes 1,32,256
  TO=200 tl r50_defaults compare $M/resnet50.onnx --backend torch --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --engines $E/r50 --out "$R/r50_defaults.json"
  timeout ${TESTS_TO:-150} python3 -m pytest -m gpu tests/ -q -p no:cacheprovider >"$R/gpu_tests.txt" 2>&1; echo "gpu tests rc=$?" | tee -a "$R/summary.txt"; tail -15 "$R/gpu_tests.txt"
  for m in efficientnet_b0 convnext_tiny mobilenetv3_large; do
    TO=80 tp $m compare $M/$m.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --engines $E/$m --out "$R/$m.json"
  done
elif [ "$PART" = G ]; then
  # third day, call 1: the ResNet-50 default run at the final code (refit, check_and_export) beside the
  # independent plain-PyTorch loop in the same call; issue 35's compare --timeline (ResNet-50 b1 graph and
  # eager, the report's net at 10 and 256); the report's net against its own independent loop
  [ -f $M/resnet50.onnx ] || python3 benchmarks/export_zoo_models.py $M resnet50 2>&1 | grep exported
  [ -f $M/report.onnx ] || python3 -c "import sys; sys.path.insert(0, 'models'); import conv_elu; conv_elu.make_onnx('report_conv_elu_k32_256', '$M/report.onnx')"
  TO=150 tp build_r50 build --backend torch --fp32 --tf32 --fp16 $M/resnet50.onnx --engines $E/r50 --batch-sizes 1,32,256
  timeout 120 python3 benchmarks/reference_resnet50_graph.py --batch-sizes 1,32,256 --out "$R/ref_r50.json" >"$R/ref_r50.txt" 2>&1; echo "ref_r50 rc=$?" | tee -a "$R/summary.txt"; cat "$R/ref_r50.txt"
  TO=260 tl r50_defaults compare $M/resnet50.onnx --backend torch --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --engines $E/r50 --out "$R/r50_defaults.json"
  for mode in graph eager; do
    flag=; [ $mode = eager ] && flag=--eager
    mkdir -p "$R/r50-b1-$mode"
    TO=90 tp r50_timeline_$mode compare $M/resnet50.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1 --time-budget-s 8 $flag --timeline --trace-dir "$R/r50-b1-$mode/traces" --engines $E/r50 --out "$R/r50-b1-$mode/compare.json"
    TO=60 tp r50_timeline_report_$mode report "$R/r50-b1-$mode/compare.json" -o "$R/r50-b1-$mode/report.html"
  done
  for b in 10 256; do
    mkdir -p "$R/report-b$b-graph"
    TO=90 tp report_timeline_b$b compare $M/report.onnx --backend torch --precisions fp32,fp16 --batch-sizes $b --time-budget-s 8 --timeline --trace-dir "$R/report-b$b-graph/traces" --engines $E/report --out "$R/report-b$b-graph/compare.json"
    TO=60 tp report_timeline_report_b$b report "$R/report-b$b-graph/compare.json" -o "$R/report-b$b-graph/report.html"
  done
  timeout 60 python3 benchmarks/reference_report_net.py --batch-sizes 10,256 --out "$R/ref_report_nocopies.json" >"$R/ref_report_nocopies.txt" 2>&1; echo "ref_report rc=$?" | tee -a "$R/summary.txt"; cat "$R/ref_report_nocopies.txt"
  TO=120 tp report_net compare $M/report.onnx --backend torch --precisions fp32,fp16 --batch-sizes 10,256 --no-copies --engines $E/report --out "$R/report_net.json"
elif [ "$PART" = H ]; then
  # third day, call 2: a serving run with its validity stamp (issue 34), kill -9 of a worker mid-compare
  # (issue 36), then architectures nobody here wrote with defaults (issue 33)
  python3 benchmarks/export_zoo_models.py $M resnet50 vit_b16 bert_base convnext_tiny mobilenetv3_large efficientnet_b0 2>&1 | grep exported
  TO=150 tp build_r50 build --backend torch --fp32 --tf32 --fp16 $M/resnet50.onnx --engines $E/r50 --batch-sizes 1,32,256
  TO=90 tp r50_serving compare $M/resnet50.onnx --backend torch --precisions fp32,fp16 --batch-sizes 8 --concurrency 1,4 --slo-ms 15 --window-s 0.5 --serving-rounds 3 --engines $E/r50 --out "$R/r50_serving.json"
  python3 -c "import json; d=json.load(open('$R/r50_serving.json')); print('serving validity:', json.dumps(d.get('validity'))[:400])" | tee -a "$R/summary.txt"
  ( t0=$SECONDS; timeout 120 python3 -m trtprof compare $M/resnet50.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,32 --time-budget-s 20 --engines $E/r50 --out "$R/r50_kill.json" >"$R/r50_kill.txt" 2>&1; echo "r50_kill rc=$? wall=$((SECONDS - t0)) s" >>"$R/summary.txt" ) &
  KP=$!
  for i in $(seq 1 100); do grep -q "^batch 1: fp16 vs fp32" "$R/r50_kill.txt" 2>/dev/null && break; sleep 1; done
  sleep 3; VICTIM=$(pgrep -f trtprof.measure.workers | head -1); echo "killing worker pid $VICTIM at $(date -u +%T)" | tee -a "$R/summary.txt"; kill -9 $VICTIM
  wait $KP; tail -4 "$R/r50_kill.txt"; grep r50_kill "$R/summary.txt"
  python3 -c "import json; d=json.load(open('$R/r50_kill.json')); print('kept batch sizes:', sorted({r['batch_size'] for r in d['results']}), 'partial:', [c.get('partial') for c in d.get('comparisons', [])])" 2>&1 | tee -a "$R/summary.txt"
  for m in vit_b16 bert_base convnext_tiny; do
    TO=140 tp $m compare $M/$m.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --engines $E/$m --out "$R/$m.json"
  done
elif [ "$PART" = T ]; then
  # third day, call 3: the last architecture, the gpu-marked tests, the 1 %-in-30 s check
  [ -f $M/efficientnet_b0.onnx ] || python3 benchmarks/export_zoo_models.py $M efficientnet_b0 mobilenetv3_large 2>&1 | grep exported
  for m in mobilenetv3_large efficientnet_b0; do
    TO=150 tp $m compare $M/$m.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --engines $E/$m --out "$R/$m.json"
  done
  timeout ${TESTS_TO:-120} python3 -m pytest tests/compare/test_compare_timeline_gpu.py -q -p no:cacheprovider >"$R/gpu_tests.txt" 2>&1; echo "gpu tests rc=$?" | tee -a "$R/summary.txt"; tail -15 "$R/gpu_tests.txt"
  [ -n "${ONE_PERCENT:-}" ] && timeout 150 python3 benchmarks/gpu_power.py --out-dir "$R/one_percent" --skip what-if --runs 2 --truth-s 5 >"$R/one_percent.txt" 2>&1; echo "one percent rc=$?" | tee -a "$R/summary.txt"; tail -8 "$R/one_percent.txt"
elif [ "$PART" = E ]; then
  # architectures nobody here wrote, with defaults; then the gpu-marked tests
  python3 benchmarks/export_zoo_models.py $M bert_base vit_b16 efficientnet_b0 convnext_tiny mobilenetv3_large 2>&1 | grep exported
  TO=150 tp bert_base compare $M/bert_base.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --engines $E/bert --out "$R/bert_base.json"
  for m in vit_b16 efficientnet_b0 convnext_tiny mobilenetv3_large; do
    TO=120 tp $m compare $M/$m.onnx --backend torch --precisions fp32,fp16 --batch-sizes 1,64 --engines $E/$m --out "$R/$m.json"
  done
  timeout ${TESTS_TO:-200} python3 -m pytest -m gpu tests/ -q -x -p no:cacheprovider >"$R/gpu_tests.txt" 2>&1; echo "gpu tests rc=$?" | tee -a "$R/summary.txt"; tail -15 "$R/gpu_tests.txt"
fi
date -u >>"$R/summary.txt"
