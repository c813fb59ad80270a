#!/usr/bin/env bash
# trtprof's onnxruntime-cuda backend against independent loops, on the GPU machine (issue 42):
#   bash benchmarks/ort_cuda_fidelity.sh STAGE...
#   (stages: gpu-tests gpu-ort gpu-all b1gapt regime regime2 inproc workergap serialloads bertmask gpustate cuptidump shapeswitch keepfp32 resnet50-run smoke resnet50 (PROF=1: under cProfile) b1gap primecost primeorder primeprof convsearch warmupwhatif sidebyside offs lifeprof caches coldstart aa256 pad blocks transformers pooled pooled1 probe aa aa6 aa-args report-net archs whatifs commands kernels)
# COMPARE_ARGS (e.g. --serial-loads) goes to the compare commands of resnet50, transformers and archs.
# Each stage runs trtprof through its CLI with defaults (cached engines built first, outside the timing),
# then the independent references in the same call: benchmarks/reference_ort_iobinding.py (plain ORT, IO
# binding, ORT's own CUDA graph; imports nothing from trtprof) and, for ResNet-50, the plain-PyTorch CUDA
# graph loop benchmarks/reference_resnet50_graph.py. Results land in $OUT (or ./ort-cuda-out).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/ort_gpu_on_device.sh"
FINAL=${OUT:-$PWD/ort-cuda-out}  # one .tgz per call comes back (the device returns at most 8 files)
W=${W:-/tmp/ortw}
OUT=$W/out
mkdir -p "$OUT" "$W" "$FINAL"
export PYTHONUNBUFFERED=1
T() { /usr/bin/time -f "wall %e s rc %x: $*" "$@"; }
quiet() { grep -v "cudnn_fe_call\|No execution plans"; }  # ORT logs cuDNN frontend fallbacks as errors (harmless)
engines() { python3 -m trtprof build --backend onnxruntime-cuda --engines "$W/engines" "$@" | tail -4; }
eng() { ls "$W"/engines/$1.$2.onnxruntime-cuda.*.onnx | head -1; }  # the engine file trtprof built: model, precision
PROV=/tmp/ortgpu/onnxruntime/capi/libonnxruntime_providers_cuda.so
cuda_lib_files() {  # ORT's CUDA provider, the CUDA libraries it links (ldd), cuDNN's siblings, torch's nvidia/*/lib
  local libs dirs
  libs=$(ldd "$PROV" 2>/dev/null | awk '/=> \// {print $3}' | grep -E "cudnn|cublas|cufft|curand|cudart|nvrtc")
  dirs=$(for l in $libs; do dirname "$l"; done | sort -u)
  echo "$PROV" $libs $(for d in $dirs; do echo "$d/libcudnn*.so*"; done) \
    $(python3 -c "import site; print(' '.join(p + '/nvidia/*/lib/lib*.so*' for p in site.getsitepackages()))")
}

for stage in "$@"; do
  echo "=== $stage $(date -u +%FT%TZ)"
  case $stage in
    gpu-tests)
      timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/backends/test_ort_cuda_gpu.py 2>&1 | tee -p "$OUT/gpu-tests.txt" | tail -5
      ;;
    gpu-ort)  # the gpu-marked tests of the onnxruntime-cuda backend and its CUPTI attribution
      timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/layers/test_ort_kernels_gpu.py \
        tests/backends/test_ort_cuda_gpu.py 2>&1 | tee -p "$OUT/gpu-ort.txt" | tail -8
      ;;
    gpu-all)  # every gpu-marked test of the suite (the CPU-only CI skips them)
      timeout "${GPU_ALL_S:-480}" python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee -p "$OUT/gpu-all.txt" | tail -15
      ;;
    b1gapt)  # ViT-B/16 and BERT-base at batch 1: ORT's call and back-to-back times per run option, ORT's own stream
      # and a user stream, beside trtprof's time_device in the same process (ort_b1_gap.py --user-stream)
      for m in ${MODELS:-vit_b16 bert_base}; do
        timeout 90 python3 "$HERE/export_zoo_models.py" "$W" $m >/dev/null 2>&1
        engines --fp32 --fp16 --batch-sizes 1 "$W/$m.onnx"
        timeout 200 python3 "$HERE/ort_b1_gap.py" --batch 1 --user-stream --out "$OUT/b1gap-$m.json" \
          "$(eng $m fp32):fp32" "$(eng $m fp16):fp16" 2>&1 | quiet | tee -p "$OUT/b1gap-$m.txt"
      done
      ;;
    regime)  # compute medians: time_device alone vs compare's interleaved blocks, one process (ort_block_costs.py --regime)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 vit_b16 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      engines --fp32 --fp16 --batch-sizes 1 "$W/vit_b16.onnx"
      timeout 200 python3 "$HERE/ort_block_costs.py" --regime --blocks 12 --batch-sizes 1,32 --json "$OUT/regime-resnet50.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | grep -E "regime|rror" | tee -p "$OUT/regime-resnet50.txt"
      timeout 150 python3 "$HERE/ort_block_costs.py" --regime --blocks 12 --batch-sizes 1 --json "$OUT/regime-vit.json" \
        "$(eng vit_b16 fp32):fp32" "$(eng vit_b16 fp16):fp16" 2>&1 | quiet | grep -E "regime|rror" | tee -p "$OUT/regime-vit.txt"
      ;;
    regime2)  # the same after what a compare worker has: arms primed at 32 and 256 first; 5 idle CUDA contexts beside
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      for variant in "--prime-first 32,256" "--idle-contexts 5" "--prime-first 32,256 --idle-contexts 5"; do
        timeout 120 python3 "$HERE/ort_block_costs.py" --regime --blocks 8 --batch-sizes 1 $variant \
          "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | grep -E "regime|rror" | tee -a "$OUT/regime2.txt"
      done
      ;;
    inproc)  # ResNet-50 fp32/fp16 at batch 1: compare with worker processes vs --in-process (its loads in this process)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --fp16 --batch-sizes 1 "$W/resnet50.onnx"
      for how in "" "--in-process"; do
        timeout 80 python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp32,fp16 --batch-sizes 1 $how --out "$OUT/inproc${how:+-in}.json" > "$OUT/inproc${how:+-in}.txt" 2>&1
        python3 -c "import json,statistics as s,sys; d=json.load(open(sys.argv[1])); [print(sys.argv[2] or 'workers', r['precision'], round(s.median(r['stage_samples_ms']['compute_ms']),4)) for r in d['results']]" "$OUT/inproc${how:+-in}.json" "$how"
      done
      ;;
    workergap)  # the batch-1 gap taken apart: parent vs child process, primed side by side or not (ort_worker_gap.py)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --fp16 --batch-sizes 1 "$W/resnet50.onnx"
      timeout 300 python3 "$HERE/ort_worker_gap.py" --batch 1 --workers 6 --json "$OUT/worker-gap.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | grep -E "worker-gap|rror" | tee -p "$OUT/worker-gap.txt"
      ;;
    bertmask)  # BERT-base batch 1: does compare's random attention_mask (ints in [0, 100)) change the GPU time?
      timeout 150 python3 "$HERE/export_zoo_models.py" "$W" bert_base >/dev/null 2>&1
      engines --fp32 --fp16 --batch-sizes 1 "$W/bert_base.onnx"
      for ints in user trtprof; do
        python3 "$HERE/reference_ort_iobinding.py" --batch-sizes 1 --ints $ints --out "$OUT/bertmask-ref-$ints.json" \
          "$(eng bert_base fp32):fp32" "$(eng bert_base fp16):fp16" 2>&1 | quiet | sed "s/^/ints=$ints /" | tee -a "$OUT/bertmask.txt"
      done
      for range in 1,2 0,100; do
        T python3 -m trtprof compare "$W/bert_base.onnx" --backend onnxruntime-cuda --engines "$W/engines" --serial-loads \
          --precisions fp32,fp16 --batch-sizes 1 --int-range $range --out "$OUT/bertmask-$range.json" 2>&1 | quiet \
          | grep -E "^batch|wall|rror" | sed "s/^/int-range=$range /" | tee -a "$OUT/bertmask.txt"
      done
      ;;
    serialloads)  # the batch-1 state: loads whose process lives do not overlap (serial) vs compare's 6 at once, then the loop
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --fp16 --batch-sizes 1 "$W/resnet50.onnx"
      timeout 400 python3 "$HERE/ort_worker_gap.py" --batch 1 --workers 6 --variants serial,side_by_side,serial \
        --json "$OUT/serial-loads.json" "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet \
        | grep -E "worker-gap .*(continuous|blocks)|rror" | tee -p "$OUT/serial-loads.txt"
      python3 "$HERE/reference_ort_iobinding.py" --batch-sizes 1 --out "$OUT/serial-loads-ref-ort.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | tee -a "$OUT/serial-loads.txt"
      ;;
    gpustate)  # does a replay's GPU time depend on what else lives on the machine? (ort_gpu_state.py)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --fp16 --batch-sizes 1 "$W/resnet50.onnx"
      timeout 400 python3 "$HERE/ort_gpu_state.py" ${KINDS:+--kinds $KINDS} --json "$OUT/gpu-state.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | grep -E "gpu-state|rror" | tee -p "$OUT/gpu-state.txt"
      ;;
    cuptidump)  # the report net's per-node CUPTI attribution, its inputs dumped (TRTPROF_CUPTI_DUMP) to replay a failed fit
      python3 models/conv_elu.py "$W" >/dev/null
      for it in 10 10 50; do
        TRTPROF_CUPTI_DUMP="$OUT/cupti-it$it" python3 -m trtprof profile "$W/report_conv_elu_k32_256.onnx" \
          --backend onnxruntime-cuda --engines "$W/engines" --precisions fp32,fp16 --batch-size 10 --iterations $it \
          --out "$OUT/cuptidump-it$it.json" 2>&1 | grep -E "note \(|rror" | tee -a "$OUT/cuptidump.txt"
      done
      ;;
    shapeswitch)  # where one runner serving two batch sizes faults (EfficientNet-B0, MobileNetV3-L; ResNet-50 the control)
      for m in ${MODELS:-efficientnet_b0 mobilenetv3_large resnet50}; do
        python3 "$HERE/export_zoo_models.py" "$W" $m >/dev/null 2>&1
        engines --fp32 --fp16 --batch-sizes 1,32 "$W/$m.onnx"
        CUDA_LAUNCH_BLOCKING=${BLOCKING:-0} timeout 300 python3 "$HERE/ort_shape_switch.py" --json "$OUT/shape-switch-$m.json" \
          "$(eng $m fp32):fp32" "$(eng $m fp16):fp16" 2>&1 | quiet | grep -E "shape-switch|rror" | tee -a "$OUT/shape-switch.txt"
      done
      ;;
    keepfp32)  # the report net: the why with its kernels (--layers), then --what-if keep-fp32 (the ineligible convs FP32)
      python3 models/conv_elu.py "$W" >/dev/null
      engines --fp32 --fp16 --batch-sizes 10 "$W/report_conv_elu_k32_256.onnx"
      T python3 -m trtprof compare "$W/report_conv_elu_k32_256.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,fp16 --batch-sizes 10 --layers --out "$OUT/report-why.json" 2>&1 | tee -p "$OUT/report-why.txt" | grep -E "^batch|why \[tensor|VALID|wall|rror" | head -12
      T python3 -m trtprof compare "$W/report_conv_elu_k32_256.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --batch-sizes 10 --what-if keep-fp32 --out "$OUT/report-keepfp32.json" 2>&1 | tee -p "$OUT/report-keepfp32.txt" | grep -E "^batch|what-if|VALID|accuracy vs|wall|rror" | head -16
      ;;
    smoke)
      python3 -c "import onnxruntime as o; print(o.__version__, o.get_available_providers())"
      python3 models/conv_elu.py "$W" >/dev/null
      engines --fp32 --fp16 --batch-sizes 1,10 "$W/report_conv_elu_k32_256.onnx"
      T python3 -m trtprof compare "$W/report_conv_elu_k32_256.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,fp16 --batch-sizes 10 --time-budget-s 8 --out "$OUT/smoke.json" 2>&1 | tail -25
      ;;
    resnet50)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      T python3 ${PROF:+-m cProfile -o "$OUT/resnet50.prof"} -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 ${COMPARE_ARGS:-} --out "$OUT/resnet50.json" 2>&1 | tee -p "$OUT/resnet50.txt" | grep -E "^batch|VALID|budget|wall|error|Error" | head -30
      python3 "$HERE/reference_ort_iobinding.py" --batch-sizes 1,32,256 --out "$OUT/resnet50-ref-ort.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp32):tf32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet
      (cd "$HERE" && python3 reference_resnet50_graph.py --batch-sizes 1,32,256) > "$OUT/resnet50-ref-torch.txt" 2>&1
      tail -12 "$OUT/resnet50-ref-torch.txt"
      ;;
    resnet50-run)  # the ResNet-50 defaults command alone (its wall against the 60-s target), its references not run
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      T python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --out "$OUT/resnet50-run.json" 2>&1 | tee -p "$OUT/resnet50-run.txt" | grep -E "^batch [0-9]+: (tf32|fp16) vs|wall|rror" | head -10
      ;;
    b1gap)  # batch 1: what lies between the reference's clock and trtprof's events (ort_b1_gap.py)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      timeout 240 python3 "$HERE/ort_b1_gap.py" --batch 1 --out "$OUT/b1-host.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 tf32):tf32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | tee -p "$OUT/b1-host.txt"
      ;;
    primecost)  # what priming costs per arm and batch size in a fresh process, alone and after the accuracy pass
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      for how in alone after-accuracy; do
        timeout 120 python3 "$HERE/ort_block_costs.py" --prime $how --json "$OUT/prime-$how.json" \
          "$(eng resnet50 fp32):fp32" "$(eng resnet50 tf32):tf32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | tee -p "$OUT/prime-$how.txt" | head -40
      done
      ;;
    primeorder)  # a worker's priming: shapes run ahead first (old), last (65dd339), a session per batch size (c1c3c09), + arms' first runs in threads (prototype, and trtprof's since 12-04g)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      timeout 240 python3 "$HERE/ort_prime_order.py" --reps "${PRIME_REPS:-4}" --json "$OUT/prime-order.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 tf32):tf32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | tee -p "$OUT/prime-order.txt" | tail -5
      ;;
    primeprof)  # a lone worker's priming (a session per batch size) under cProfile, twice: where its seconds go
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      for i in 1 2; do
        PRIME_PROFILE=1 timeout 120 python3 "$HERE/ort_prime_order.py" --child own-sessions \
          "$(eng resnet50 fp32):fp32" "$(eng resnet50 tf32):tf32" "$(eng resnet50 fp16):fp16" > "$OUT/prime-prof-$i.txt" 2>&1
        grep -v "cudnn_fe_call\|No execution plans" "$OUT/prime-prof-$i.txt" | head -${PROF_LINES:-75}
      done
      ;;
    convsearch)  # ORT's cuDNN search mode: EXHAUSTIVE (mode B, trtprof's) vs HEURISTIC (mode A): priming seconds, compute
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      timeout 300 python3 "$HERE/ort_conv_search.py" --reps "${SEARCH_REPS:-3}" --json "$OUT/conv-search.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 tf32):tf32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | tee -p "$OUT/conv-search.txt" | tail -4
      ;;
    warmupwhatif)  # ResNet-50 defaults with shorter load warm-ups (WARMUP_FIRST_MS, WARMUP_LOAD_MS; 100, 30) beside the default
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      T python3 "$HERE/ort_warmup_whatif.py" "${WARMUP_FIRST_MS:-100}" "${WARMUP_LOAD_MS:-30}" compare "$W/resnet50.onnx" \
        --backend onnxruntime-cuda --engines "$W/engines" --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 \
        --out "$OUT/warmup-short.json" 2>&1 | tee -p "$OUT/warmup-short.txt" | grep -E "^batch [0-9]+: (tf32|fp16) vs|wall|rror" | head -10
      T python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --out "$OUT/warmup-default.json" 2>&1 \
        | tee -p "$OUT/warmup-default.txt" | grep -E "^batch [0-9]+: (tf32|fp16) vs|wall|rror" | head -10
      python3 "$HERE/reference_ort_iobinding.py" --batch-sizes 1,32,256 --out "$OUT/warmup-ref-ort.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp32):tf32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet
      for how in short default; do python3 "$HERE/ort_fidelity_table.py" "$OUT/warmup-$how.json" "$OUT/warmup-ref-ort.json"; done
      ;;
    blocks)  # where a block's seconds go, each block set up anew vs kept between blocks (ort_block_costs.py)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      timeout 300 python3 "$HERE/ort_block_costs.py" --blocks 6 --json "$OUT/block-costs.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 tf32):tf32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet | tee -p "$OUT/block-costs.txt" | head -60
      ;;
    transformers)  # MODELS: which (default both)
      for m in ${MODELS:-vit_b16 bert_base}; do
        python3 "$HERE/export_zoo_models.py" "$W" $m >/dev/null 2>&1
        engines --fp32 --fp16 --batch-sizes 1,32 "$W/$m.onnx"
        T python3 -m trtprof compare "$W/$m.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp32,fp16 --batch-sizes 1,32 ${COMPARE_ARGS:-} --out "$OUT/$m.json" 2>&1 | tee -p "$OUT/$m.txt" | grep -E "^batch|VALID|eager|wall|rror" | head -20
        python3 "$HERE/reference_ort_iobinding.py" --batch-sizes 1,32 --out "$OUT/$m-ref-ort.json" \
          "$(eng $m fp32):fp32" "$(eng $m fp16):fp16" 2>&1 | quiet
      done
      ;;
    pooled)  # ViT/BERT defaults at batch 1 and 32 against the reference pooled over 6 sessions (--sessions 6)
      for m in vit_b16 bert_base; do
        python3 "$HERE/export_zoo_models.py" "$W" $m >/dev/null 2>&1
        engines --fp32 --fp16 --batch-sizes 1,32 "$W/$m.onnx"
        T python3 -m trtprof compare "$W/$m.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp32,fp16 --batch-sizes 1,32 --out "$OUT/$m.json" 2>&1 | tee -p "$OUT/$m.txt" | grep -E "^batch|VALID|eager|wall|rror" | head -20
        python3 "$HERE/reference_ort_iobinding.py" --sessions 6 --iters 200 --batch-sizes 1,32 --out "$OUT/$m-ref-ort.json" \
          "$(eng $m fp32):fp32" "$(eng $m fp16):fp16" 2>&1 | quiet | grep pooled
      done
      ;;
    pooled1)  # ViT/BERT defaults at batch 1 against the reference pooled over 6 sessions, serial and back to back
      for m in vit_b16 bert_base; do
        python3 "$HERE/export_zoo_models.py" "$W" $m >/dev/null 2>&1
        engines --fp32 --fp16 --batch-sizes 1 "$W/$m.onnx"
        T python3 -m trtprof compare "$W/$m.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp32,fp16 --batch-sizes 1 --out "$OUT/$m-b1.json" 2>&1 | tee -p "$OUT/$m-b1.txt" | grep -E "^batch|eager|wall|rror" | head -6
        python3 "$HERE/reference_ort_iobinding.py" --sessions 6 --iters 150 --batch-sizes 1 --out "$OUT/$m-b1-ref-ort.json" \
          "$(eng $m fp32):fp32" "$(eng $m fp16):fp16" 2>&1 | quiet | grep pooled
      done
      ;;
    kernels)  # per-node GPU kernel times (CUPTI, cupti-python) against Kineto; the report net's why with them
      timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/layers/test_ort_kernels_gpu.py 2>&1 | tee -p "$OUT/kernels-gpu-test.txt" | tail -3
      python3 models/conv_elu.py "$W" >/dev/null
      engines --fp32 --fp16 --batch-sizes 10,256 "$W/report_conv_elu_k32_256.onnx"
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --fp16 --batch-sizes 32 "$W/resnet50.onnx"
      for mb in report_conv_elu_k32_256:10 report_conv_elu_k32_256:256 resnet50:32; do
        m=${mb%:*}; b=${mb#*:}
        T python3 -m trtprof profile "$W/$m.onnx" --backend onnxruntime-cuda --engines "$W/engines" --precisions fp32,fp16 \
          --batch-size $b --out "$OUT/kprofile-$m-b$b.json" > "$OUT/kprofile-$m-b$b.txt" 2>&1; tail -1 "$OUT/kprofile-$m-b$b.txt"
        python3 "$HERE/reference_ort_kernels_kineto.py" --batch $b --out "$OUT/kineto-$m-b$b.json" \
          "$(eng $m fp32):fp32" "$(eng $m fp16):fp16" 2>&1 | quiet
        python3 "$HERE/reference_ort_kernels_kineto.py" --compare "$OUT/kineto-$m-b$b.json" --trtprof "$OUT/kprofile-$m-b$b.json" 2>&1 | tee -p "$OUT/kcheck-$m-b$b.txt"
      done
      head -45 "$OUT/kprofile-report_conv_elu_k32_256-b10.txt"
      T python3 -m trtprof compare "$W/report_conv_elu_k32_256.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,fp16 --batch-sizes 10 --layers --out "$OUT/kreport-why.json" 2>&1 | tee -p "$OUT/kreport-why.txt" | grep -vE "^\s+(fp32|fp16): median" | grep -iE "why|slower|nchw|layer|speedup|VALID|wall|rror" | head -30
      T python3 -m trtprof compare "$W/report_conv_elu_k32_256.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --batch-sizes 10 --what-if nhwc --out "$OUT/kreport-nhwc.json" 2>&1 | tee -p "$OUT/kreport-nhwc.txt" | grep -E "^batch|what-if|VALID|wall|rror" | head -12
      ;;
    probe)  # the eager batch-1 gap, one ORT setting at a time (needs the transformers stage's engines)
      python3 "$HERE/ort_cuda_eager_probe.py" --batch 1 --out "$OUT/eager-probe.json" \
        "$(eng bert_base fp32)" "$(eng bert_base fp16)" "$(eng vit_b16 fp16)" 2>&1 | quiet | grep probe
      python3 "$HERE/reference_ort_iobinding.py" --eager --batch-sizes 1 --out "$OUT/bert-ref-ort-eager.json" \
        "$(eng bert_base fp32):fp32" "$(eng bert_base fp16):fp16" 2>&1 | quiet
      ;;
    aa6)  # A/A at the default budget (it grows to the 6-load minimum): must be 0 decisive
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp16 --batch-sizes 1,32 "$W/resnet50.onnx"
      for i in $(seq 1 "${AA_RUNS:-6}"); do
        python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp16,fp16 --batch-sizes 32 --out "$OUT/aa6-$i.json" 2>&1 | grep -E "^batch 32: fp16 vs fp16  speedup|loads|VALID" | head -3
      done
      ;;
    aa-args)  # A/A at batch 1 and 32 with COMPARE_ARGS (e.g. --serial-loads), AA_RUNS times: must be 0 decisive
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp16 --batch-sizes 1,32 "$W/resnet50.onnx"
      for i in $(seq 1 "${AA_RUNS:-3}"); do
        T python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp16,fp16 --batch-sizes 1,32 ${COMPARE_ARGS:-} --out "$OUT/aa-args-$i.json" 2>&1 | grep -E "^batch [0-9]+: fp16 vs fp16|wall" | head -3
      done
      ;;
    offs|sidebyside)  # ResNet-50 defaults beside one run per default turned off (OFFS: module.NAME=value ..., each
      # through ort_setting_whatif.py; by default the two built without a GPU: 12-04g's side-by-side first runs, 12-05's
      # primed later-load warm-up as a round's; sidebyside: the first only), then one ORT loop and a fidelity table per run
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      off_list=${OFFS:-trtprof.measure.serial_loads.PRIME_SIDE_BY_SIDE=False trtprof.measure.blocks.PRIMED_WARMUP_AS_ROUND=False}
      [ $stage = sidebyside ] && off_list=${OFFS:-trtprof.measure.serial_loads.PRIME_SIDE_BY_SIDE=False}
      offs=($off_list)
      runs=(default "${offs[@]}")
      for i in "${!runs[@]}"; do
        how=${runs[$i]}; set=(-m trtprof); [ $i -gt 0 ] && set=("$HERE/ort_setting_whatif.py" "$how")
        T python3 "${set[@]}" compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --out "$OUT/$stage-$i.json" 2>&1 \
          | tee -p "$OUT/$stage-$i.txt" | grep -E "^batch [0-9]+: (tf32|fp16) vs|wall|rror|this run" | head -10
      done
      python3 "$HERE/reference_ort_iobinding.py" --batch-sizes 1,32,256 --out "$OUT/$stage-ref-ort.json" \
        "$(eng resnet50 fp32):fp32" "$(eng resnet50 fp32):tf32" "$(eng resnet50 fp16):fp16" 2>&1 | quiet
      for i in "${!runs[@]}"; do echo "== $stage-$i: ${runs[$i]}"; python3 "$HERE/ort_fidelity_table.py" "$OUT/$stage-$i.json" "$OUT/$stage-ref-ort.json"; done
      ;;
    lifeprof)  # ResNet-50 defaults with every life's worker under cProfile (TRTPROF_WORKER_PROFILE) and the parent
      # too: where life 0's start (the accuracy pass) and a later life's priming and serving spend their seconds.
      # A diagnostic: the profiler slows the timed loop, so this run's times are not measurements
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      TRTPROF_WORKER_PROFILE="$OUT/lifeprof" T python3 -m cProfile -o "$OUT/lifeprof-parent.prof" -m trtprof compare \
        "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" --precisions fp32,tf32,fp16 \
        --batch-sizes 1,32,256 --out "$OUT/lifeprof.json" > "$OUT/lifeprof.txt" 2>&1
      grep -E "^batch [0-9]+: (tf32|fp16) vs|wall|rror" "$OUT/lifeprof.txt" | head -8
      python3 - "$OUT/lifeprof-parent.prof" $(ls "$OUT"/lifeprof/worker-*.prof | sort | head -${LIVES:-2}) <<'PY'
import pstats, sys
for path in sys.argv[1:]:
    for key, count in (("tottime", 25), ("cumulative", 45)):
        print(f"===== {path} by {key}")
        pstats.Stats(path).sort_stats(key).print_stats(count)
PY
      ;;
    caches)  # what of the CUDA libraries ORT's CUDA provider loads is in the page cache, and the driver's JIT cache size:
      # run before and after the first compare on a fresh machine (cache_residency.py says why)
      echo "== caches $(date -u +%T) $(ldd "$PROV" 2>/dev/null | grep -c 'not found') of the provider's libraries not found by ldd" | tee -a "$OUT/caches.txt"
      python3 "$HERE/cache_residency.py" $(cuda_lib_files) | tee -a "$OUT/caches.txt" | grep -E "all |compute cache|cudnn_engines|not a file"
      ;;
    coldstart)  # ResNet-50 defaults right after the CUDA libraries were evicted from the page cache (cache_residency.py
      # --evict), without and with trtprof's readahead of them (TRTPROF_ORT_READAHEAD=0/1, COLD_RUNS: the order); the
      # wall and life 0's seconds of each run. Only where the first compare's penalty is the page cache (stage caches)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp32 --tf32 --fp16 --batch-sizes 1,32,256 "$W/resnet50.onnx"
      for how in ${COLD_RUNS:-0 1}; do
        python3 "$HERE/cache_residency.py" --evict $(cuda_lib_files) | grep -E "all " | sed "s/^/evicted, then: /"
        TRTPROF_ORT_READAHEAD=$how T python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp32,tf32,fp16 --batch-sizes 1,32,256 --out "$OUT/coldstart-$how.json" > "$OUT/coldstart-$how.txt" 2>&1
        grep -E "wall|rror" "$OUT/coldstart-$how.txt" | sed "s/^/readahead=$how /"
        python3 -c "import json,sys; l=json.load(open(sys.argv[1]))['budget']['lives'][0]; print('readahead=' + sys.argv[2], 'life 0:', {k: l.get(k) for k in ('engines_s', 'priming_s', 'waited_s')})" "$OUT/coldstart-$how.json" "$how"
      done
      ;;
    aa256)  # A/A at batch 256, where every call is long enough for one warm-up call per block: must be 0 decisive
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp16 --batch-sizes 256 "$W/resnet50.onnx"
      for i in $(seq 1 "${AA_RUNS:-3}"); do
        python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp16,fp16 --batch-sizes 256 --out "$OUT/aa256-$i.json" 2>&1 | grep -E "^batch 256: fp16 vs fp16  speedup|VALID" | head -2
      done
      ;;
    pad)  # the report net's tensor_core_ineligible cause tested: --what-if pad-channels on this backend
      python3 models/conv_elu.py "$W" >/dev/null
      engines --fp32 --fp16 --batch-sizes 10 "$W/report_conv_elu_k32_256.onnx"
      T python3 -m trtprof compare "$W/report_conv_elu_k32_256.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --batch-sizes 10 --what-if pad-channels --out "$OUT/report-pad.json" 2>&1 | tee -p "$OUT/report-pad.txt" | grep -E "^batch|what-if|VALID|wall|rror" | head -12
      ;;
    whatifs)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 vit_b16 >/dev/null 2>&1
      T python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --what-if nhwc --batch-sizes 1,32 --out "$OUT/whatif-nhwc-resnet50.json" 2>&1 | tee -p "$OUT/whatif-nhwc-resnet50.txt" | grep -E "^batch|what-if|VALID|wall|rror" | head -12
      T python3 -m trtprof compare "$W/vit_b16.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --what-if ort-fusions --batch-sizes 1,32 --out "$OUT/whatif-fusions-vit.json" 2>&1 | tee -p "$OUT/whatif-fusions-vit.txt" | grep -E "^batch|what-if|fus|VALID|wall|rror" | head -12
      ;;
    commands)  # item 4: profile, --timeline, serving (memory and energy are in every compare result)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      T python3 -m trtprof profile "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,fp16 --batch-size 32 --out "$OUT/profile-resnet50.json" 2>&1 | tee -p "$OUT/profile-resnet50.txt" | head -30
      python3 models/conv_elu.py "$W" >/dev/null
      T python3 -m trtprof compare "$W/report_conv_elu_k32_256.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,fp16 --batch-sizes 10 --timeline --trace-dir "$OUT/traces" --concurrency 1,4 \
        --out "$OUT/commands-report-net.json" 2>&1 | tee -p "$OUT/commands-report-net.txt" | grep -E "^batch|timeline|serving|p99|memory|energy|VALID|wall|rror" | head -30
      ;;
    aa)
      python3 "$HERE/export_zoo_models.py" "$W" resnet50 >/dev/null 2>&1
      engines --fp16 --batch-sizes 1,32 "$W/resnet50.onnx"
      for i in 1 2 3 4 5 6; do
        python3 -m trtprof compare "$W/resnet50.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp16,fp16 --batch-sizes 32 --time-budget-s 6 --out "$OUT/aa-$i.json" 2>&1 | grep -E "^batch 32: fp16 vs fp16  speedup"
      done
      ;;
    report-net)
      python3 models/conv_elu.py "$W" >/dev/null
      engines --fp32 --fp16 --batch-sizes 10,256 "$W/report_conv_elu_k32_256.onnx"
      T python3 -m trtprof compare "$W/report_conv_elu_k32_256.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
        --precisions fp32,fp16 --batch-sizes 10,256 --layers --out "$OUT/report-net.json" 2>&1 | tee -p "$OUT/report-net.txt" | grep -vE "^\s+(fp32|fp16): median" | head -60
      python3 "$HERE/reference_ort_iobinding.py" --batch-sizes 10,256 --out "$OUT/report-net-ref-ort.json" \
        "$(eng report_conv_elu_k32_256 fp32):fp32" "$(eng report_conv_elu_k32_256 fp16):fp16" 2>&1 | quiet
      ;;
    archs)  # ARCHS: which (default all three)
      for m in ${ARCHS:-efficientnet_b0 convnext_tiny mobilenetv3_large}; do
        python3 "$HERE/export_zoo_models.py" "$W" $m >/dev/null 2>&1
        engines --fp32 --fp16 --batch-sizes 1,32 "$W/$m.onnx"
        T python3 -m trtprof compare "$W/$m.onnx" --backend onnxruntime-cuda --engines "$W/engines" \
          --precisions fp32,fp16 --batch-sizes 1,32 ${COMPARE_ARGS:-} --out "$OUT/$m.json" 2>&1 | tee -p "$OUT/$m.txt" | grep -E "^batch|eager|wall|rror|why" | head -12
      done
      ;;
  esac
done
tar -C "$OUT" -czf "$FINAL/ort-cuda-$(date -u +%H%M%S).tgz" . && rm -rf "$OUT"
