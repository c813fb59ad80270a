"""A markdown table of ``benchmarks/compare_timeline.py`` runs: per run (NAME.txt, its stderr, beside
NAME.json or NAME.json.gz, its --out) the wall time, the load phase (``load_reference``), when the first batch size's loop
began, the budget's ``startup_s``, the parent's and the workers' CPU seconds, the parent's max RSS, what
ran beside the timing (``concurrent_with_timing``), the verdicts and the load average. Runs named warm-*
(the ones that built the engines) are left out.

    python benchmarks/compare_timeline_summary.py FOLDER
"""
import gzip, json, re, sys
from pathlib import Path

def load(path):
    """NAME.json, or NAME.json.gz where it was compressed (the committed results are)."""
    gz = path.with_name(path.name + ".gz")
    return json.loads(gzip.decompress(gz.read_bytes()) if not path.exists() and gz.exists() else path.read_text())

def phase(text, name):
    t0 = re.search(rf"^\s*([\d.]+) \(\+\s*[\d.]+\) > {name}$", text, re.M)
    t1 = re.search(rf"^\s*([\d.]+) \(\+\s*[\d.]+\) < {name}$", text, re.M)
    return (float(t1.group(1)) - float(t0.group(1))) if t0 and t1 else None

rows = []
for f in sorted(Path(sys.argv[1]).glob("*.txt")):
    if f.stem.startswith("warm"):
        continue
    text = f.read_text()
    data = load(f.with_suffix(".json"))
    wall = float(re.search(r"wall ([\d.]+) s", text).group(1))
    cpu = re.search(r"this process ([\d.]+) \(max RSS (\d+) MiB\), its reaped children \(the workers\) ([\d.]+)", text)
    first_loop = re.search(r"^\s*([\d.]+) \(\+\s*[\d.]+\) > run_interleaved$", text, re.M)
    conc = data.get("concurrent_with_timing") or {}
    verdicts = "; ".join(f"b{c['batch_size']} {c['speedup']['estimate']:.3f} {c['verdict']} {c['loads']}L "
                         f"acc {c['accuracy']['verdict']['verdict']}" for c in data["comparisons"])
    rows.append((f.stem, wall, phase(text, "load_reference"), float(first_loop.group(1)) if first_loop else None,
                 data["budget"]["startup_s"], cpu and float(cpu.group(1)), cpu and int(cpu.group(2)),
                 cpu and float(cpu.group(3)), conc.get("overlapping"), verdicts,
                 re.search(r"load average: ([\d.]+)", text).group(1)))
print("| run | wall s | load_reference s | first loop at s | startup_s (JSON) | parent CPU s | parent max RSS MiB | workers CPU s | beside timing | verdicts | load avg |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join("–" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v)) for v in r) + " |")
