#!/bin/bash
# A serving run whose validity stamps are checked (issue 34's last GPU item; named issue34_serving.sh
# before issue 41): a serving run whose JSON carries `validity` (the sweep's own stamp and the
# results file's), on the H200 with the torch backend and ResNet-50 from benchmarks/export_zoo_models.py.
#
#   on the device machine, repository root:   OUT=$OUT bash benchmarks/serving_validity.sh torch
#   on a CPU (what tests/serving/test_serving_validity_script.py runs, with a small model):
#     MODEL=net.onnx WINDOW_S=0.05 BATCHES=1,2 OUT=/tmp/o bash benchmarks/serving_validity.sh onnxruntime
#
# Writes $OUT/serving_validity/serving.json and serving.txt (the terminal) and prints the stamps it found; exits 1
# when the JSON has no `validity` (the sweep's or the file's). ~2.5 min on the H200 (export ~20 s, build
# ~60 s, 2 precisions × 2 batch sizes × 2 levels × 3 rounds of 0.5-s windows with priming).
set -u
BACKEND=${1:-torch}
R=${OUT:-/tmp/out}/serving_validity; mkdir -p "$R"
PY=${PYTHON:-python3}
E=${ENGINES:-/tmp/e34}
export PYTHONUNBUFFERED=1
if [ -z "${MODEL:-}" ]; then
  M=/tmp/m34; "$PY" benchmarks/export_zoo_models.py $M resnet50 2>&1 | grep exported; MODEL=$M/resnet50.onnx
fi
timeout ${BUILD_TO:-240} "$PY" -m trtprof build "$MODEL" --backend "$BACKEND" --fp32 --fp16 \
  --batch-sizes "${BATCHES:-1,32}" --engines "$E" >"$R/build.txt" 2>&1 || { echo "build failed"; tail -5 "$R/build.txt"; exit 2; }
# 3 serving rounds: system.validity.MIN_SERVING_ROUNDS (2 make the sweep NOT VALID: no interval over rounds)
timeout ${SERVE_TO:-300} "$PY" -m trtprof bench "$E" --concurrency 1,4 --serving-rounds 3 --window-s "${WINDOW_S:-0.5}" \
  --slo-ms "${SLO_MS:-15}" --iterations 50 --out "$R/serving.json" >"$R/serving.txt" 2>&1
echo "bench rc=$?"
grep -E "VALID|at p99" "$R/serving.txt" | head -12
"$PY" - "$R/serving.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
sweeps = data.get("serving") or []
stamps = [("file", data.get("validity"))] + [(f"sweep {i}", s.get("validity")) for i, s in enumerate(sweeps)]
for name, v in stamps:
    print(f"{name}: {v['stamp'] if v else 'NO validity'}")
sys.exit(0 if sweeps and all(v for _, v in stamps) else 1)
PY
