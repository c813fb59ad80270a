#!/bin/bash
# Issue 36 deliverable 2 on a real backend: kill -9 one measurement worker (what the OOM killer does) in
# the middle of a compare and check that nothing finished is lost. A compare over batch sizes 1,32 runs;
# once batch 1 is decided and batch 32 has finished rounds, the first `trtprof.measure.workers` child of
# the compare (load 0's: every batch size uses it) gets SIGKILL. Expected: exit 2; the last stderr line
# names the load and SIGKILL; the JSON keeps batch 1 whole (not partial), names SIGKILL in worker_lost,
# and has batch 32 either as a partial entry (stop_reason load_lost) or pending; no worker is left.
# Prints PASS or FAIL lines and exits 0 only when every check passes.
#
# On the H200 (repository root, trtprof installed; ResNet-50 exported by benchmarks/export_zoo_models.py):
#   bash benchmarks/gpu_worker_kill.sh --backend torch
# On the CPU (the same script; the demo convnet, ONNX Runtime, smaller batch sizes):
#   bash benchmarks/gpu_worker_kill.sh --backend onnxruntime --model demo --batch-sizes 1,8
# Options: --backend B (default torch), --model PATH|resnet50|demo (default resnet50), --batch-sizes A,B
# (default 1,32: the kill comes during B), --out DIR (default $OUT/worker_kill or /tmp/worker_kill, must
# not exist yet), --wait S (the longest the compare may run, default 300). PYTHON picks the interpreter.
set -u
BACKEND=torch; MODEL=resnet50; SIZES=1,32; WAIT=300
R=${OUT:-/tmp}/worker_kill
while [ $# -gt 0 ]; do
  case $1 in
    --backend) BACKEND=$2; shift 2;;
    --model) MODEL=$2; shift 2;;
    --batch-sizes) SIZES=$2; shift 2;;
    --out) R=$2; shift 2;;
    --wait) WAIT=$2; shift 2;;
    *) echo "gpu_worker_kill.sh: unknown argument $1" >&2; exit 2;;
  esac
done
PY=${PYTHON:-python3}
FIRST=${SIZES%%,*}; LAST=${SIZES##*,}
if [ "$FIRST" = "$LAST" ]; then echo "gpu_worker_kill.sh: --batch-sizes needs two sizes (A,B)" >&2; exit 2; fi
if [ -e "$R" ]; then echo "gpu_worker_kill.sh: $R exists: give a new --out folder" >&2; exit 2; fi
mkdir -p "$R"
export PYTHONUNBUFFERED=1
case $MODEL in
  resnet50) $PY benchmarks/export_zoo_models.py "$R/models" resnet50 | grep exported || exit 1; MODEL=$R/models/resnet50.onnx;;
  demo) $PY -c "from trtprof.model.demo import make_demo_model; make_demo_model('$R/demo.onnx', channels=8, image=16, classes=10)" || exit 1
        MODEL=$R/demo.onnx;;
esac
E=$R/engines
# the engines first, so that the compare's time goes to loads and rounds
$PY -m trtprof build "$MODEL" --backend "$BACKEND" --fp32 --fp16 --batch-sizes "$SIZES" --engines "$E" >"$R/build.txt" 2>&1 \
  || { echo "FAIL build (rc $?): $(tail -1 "$R/build.txt")"; exit 1; }
$PY -m trtprof compare "$MODEL" --backend "$BACKEND" --precisions fp32,fp16 --batch-sizes "$SIZES" --engines "$E" \
  --out "$R/compare.json" >"$R/compare.out" 2>"$R/compare.err" &
PID=$!
VICTIM=; WORKERS=
for _ in $(seq $((WAIT * 10))); do
  kill -0 $PID 2>/dev/null || break
  if [ -z "$VICTIM" ] && grep -q "^batch $FIRST:" "$R/compare.err" &&
     grep -Eq "^  batch $LAST: [0-9]+ loads?, [1-9][0-9]* rounds?," "$R/compare.err"; then
    WORKERS=$(for p in $(pgrep -P $PID); do tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q trtprof.measure.workers && echo $p; done | sort -n)
    VICTIM=$(echo "$WORKERS" | head -1)
    if [ -n "$VICTIM" ]; then
      kill -9 "$VICTIM" && echo "killed worker $VICTIM (SIGKILL) during batch $LAST at $(date -u +%T)" | tee "$R/killed.txt"
    fi
  fi
  sleep 0.1
done
if kill -0 $PID 2>/dev/null; then kill $PID; echo "FAIL the compare ran past $WAIT s (hung after its worker died?)"; exit 1; fi
wait $PID; RC=$?
sleep 1  # the workers of a parent that exited get SIGKILL from Linux (PR_SET_PDEATHSIG): give it a moment
LEFT=0; for p in $WORKERS; do kill -0 "$p" 2>/dev/null && LEFT=$((LEFT + 1)); done  # of the workers seen at the kill
$PY - "$R" "$RC" "$FIRST" "$LAST" "${VICTIM:-}" "$LEFT" <<'EOF'
import json, sys
from pathlib import Path
r, rc, first, last, victim, left = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
err = [line for line in (r / "compare.err").read_text().splitlines() if line.strip()]
checks = [("a worker was killed", bool(victim), "the compare ended before batch %d ran rounds" % last)]
checks.append(("exit code 2", rc == 2, f"rc {rc}"))
checks.append(("no traceback", not any("Traceback" in line for line in err), "a traceback on stderr"))
tail = err[-1] if err else ""
checks.append(("last line names the load and SIGKILL", "load" in tail and "SIGKILL" in tail, tail))
try:
    data = json.loads((r / "compare.json").read_text())
except (OSError, ValueError) as e:
    data = {}
    checks.append(("JSON written", False, str(e)))
batches = {c["batch_size"]: c for c in data.get("comparisons", [])}
checks.append((f"batch {first} kept whole", first in batches and not batches[first].get("partial"), sorted(batches)))
checks.append(("worker_lost names SIGKILL", "SIGKILL" in (data.get("worker_lost") or ""), data.get("worker_lost")))
b = batches.get(last)
checks.append((f"batch {last} partial (load_lost) or pending",
               (b is not None and b.get("partial") is True and b.get("stop_reason") == "load_lost")
               or last in data.get("pending_batch_sizes", []),
               {k: (b or {}).get(k) for k in ("partial", "stop_reason", "rounds")} | {"pending": data.get("pending_batch_sizes")}))
checks.append(("no worker left", left == 0, f"{left} children left"))
for name, ok, why in checks:
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {why}"))
print(f"last line: {tail}")
if first in batches:
    s = batches[first]["speedup"]
    print(f"batch {first}: {s['estimate']:.3f}x [{s['ci_low']:.3f}, {s['ci_high']:.3f}] {batches[first]['verdict']} "
          f"({batches[first]['loads']} loads, {batches[first]['rounds']} rounds)")
if b is not None:
    print(f"batch {last}: partial, {b.get('loads')} loads, {b.get('rounds')} rounds kept")
sys.exit(0 if all(ok for _, ok, _ in checks) else 1)
EOF
