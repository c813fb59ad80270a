"""The first load's cost in real compare runs on this CPU (what measure.budget.COSTLY_LOAD_S was compared with until issue 42 #5 removed that rule):
opened and warmed up, workers and in-process, the demo model at batch 1 and 8 (ONNX Runtime).
Run: PYTHONPATH=. python benchmarks/first_load_cpu.py (prints the uptime load average too)."""
import sys, tempfile
from pathlib import Path
from trtprof.measure import budget
from trtprof.model.demo import make_demo_model
from trtprof.cli import main
seen = []
real = budget.BatchWindow.fitted
def fitted(self, needed_s, first_load_s, loads, rounds):
    seen.append(first_load_s)
    return real(self, needed_s, first_load_s, loads, rounds)
budget.BatchWindow.fitted = fitted
d = Path(tempfile.mkdtemp())
m = make_demo_model(d / "c.onnx", channels=8, image=16, classes=10)
for extra in ([], ["--in-process"]):
    main(["compare", str(m), "--engines", str(d / "e"), "--out", str(d / "c.json"), "--backend", "onnxruntime",
          "--batch-sizes", "1,8"] + extra)
    print("workers" if not extra else "in-process", [round(s, 3) for s in seen], file=sys.stderr)
    seen.clear()
import os; print("load average", os.getloadavg(), file=sys.stderr)
