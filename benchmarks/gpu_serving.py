"""What FP16 buys in production on a GPU (issue 24): latency–throughput curves under concurrency,
throughput at a p99 target with a verdict, memory, and joules per inference cross-checked against
nvidia-smi's power readings over the same windows.

Models: ResNet-50 (torchvision, weights=None, exported to ONNX; ``gpu_fidelity.MAKERS``) and the
report's net (``models/conv_elu.py``: ``report_conv_elu_k32_256``), on trtprof's torch backend, at
fp32 (TF32 off), tf32 and fp16, batch sizes × concurrency levels, in interleaved rounds. Every
number comes from trtprof's serving sweep (``trtprof.serving_sweep``); this script only runs it,
logs ``nvidia-smi --query-gpu=power.draw --format=csv -lms 100`` for the whole run beside it, and
integrates those readings over each window's wall-clock edges for the cross-check.

Usage (device machine, repository root; ~5 min on an H200, ~1 min with --quick):
    python3 benchmarks/gpu_serving.py --out-dir "$OUT/gpu_serving" --max-s 540
    python3 benchmarks/gpu_serving.py --quick --out-dir "$OUT/gpu_serving"
``--max-s`` bounds the whole run: no point starts after ``max_s - RESERVE_S`` seconds (the reserve is for
the last window, its priming and writing the files); what finished is written as usual, and summary.txt
says where the run stopped. Check the driver first with ``gpu_serving_check.py`` (~1 min).
Writes per model: serving-<model>.json (a trtprof results file with the sweep: `trtprof report` renders
it), report-<model>.html, curve-<model>.png; nvidia-smi-power.csv; summary.txt (tables, verdicts,
the energy cross-check per precision).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MODELS = ("resnet50", "report_conv_elu_k32_256")
# p99 targets per model: a few times the batch-1 latency measured on the H200 (ResNet-50 eager ~4–5 ms,
# FACTS.md; the report's net ~0.1–0.5 ms), so that some but not all points meet them.
SLO_MS = {"resnet50": 15.0, "report_conv_elu_k32_256": 5.0}
FULL = {"batch_sizes": "1,8,32,64", "concurrency": "1,2,4,8", "window_s": 0.5, "rounds": 3}
QUICK = {"batch_sizes": "1,32", "concurrency": "1,4", "window_s": 0.3, "rounds": 2}
SMI_PERIOD_MS = 100
RESERVE_S = 20.0  # --max-s: time kept for the last point and the files


def start_power_log(path: Path) -> subprocess.Popen | None:
    """nvidia-smi logging the board power every 100 ms with a timestamp, for the whole run."""
    try:
        return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,power.draw", "--format=csv,noheader,nounits",
                                 f"-lms={SMI_PERIOD_MS}", "-i", os.environ.get("SMI_GPU", "0")],
                                stdout=path.open("w"), stderr=subprocess.DEVNULL)
    except OSError as err:
        print(f"nvidia-smi not started ({err}): no cross-check", file=sys.stderr)
        return None


def read_power_log(path: Path) -> list[tuple[float, float]]:
    """(unix time, watts) per nvidia-smi line; its timestamps are local time, as ``time.time`` edges."""
    out = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2:
            continue
        try:
            when = dt.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((when, float(parts[1])))
        except ValueError:
            continue
    return out


def smi_joules(log: list[tuple[float, float]], start: float, end: float) -> tuple[float | None, int]:
    """Mean nvidia-smi power inside [start, end] × its length; (None, 0) without readings there."""
    inside = [w for t, w in log if start <= t <= end]
    if not inside:
        return None, 0
    return sum(inside) / len(inside) * (end - start), len(inside)


def cross_check(sweep: dict, log: list[tuple[float, float]]) -> dict[str, dict]:
    """Per arm: NVML-counter joules vs nvidia-smi power × time over the same windows."""
    out: dict[str, dict] = {}
    for p in sweep["points"]:
        acc = out.setdefault(p["arm"], {"nvml_joules": 0.0, "smi_joules": 0.0, "windows": 0, "smi_readings": 0,
                                        "inferences": 0})
        for r in p["rounds"]:
            e = r.get("energy") or {}
            joules, n = smi_joules(log, r["started_unix"], r["ended_unix"])
            if e.get("status") != "ok" or joules is None:
                continue
            acc["nvml_joules"] += e["joules"]
            acc["smi_joules"] += joules
            acc["windows"] += 1
            acc["smi_readings"] += n
            acc["inferences"] += e.get("inferences", 0)
    for acc in out.values():
        acc["nvml_over_smi"] = acc["nvml_joules"] / acc["smi_joules"] if acc["smi_joules"] > 0 else None
        acc["nvml_joules_per_inference"] = acc["nvml_joules"] / acc["inferences"] if acc["inferences"] else None
        acc["smi_joules_per_inference"] = acc["smi_joules"] / acc["inferences"] if acc["inferences"] else None
    return out


def run_model(name: str, args, settings: dict, work: Path, stop=None) -> tuple[dict, float]:
    """Export, build (torch backend) and sweep one model; returns (sweep JSON, p99 target).
    ``stop()`` true: no further point starts (``--max-s``); the sweep keeps what it measured."""
    from gpu_fidelity import MAKERS

    from trtprof.build import BuildSettings, build_engines
    from trtprof.inputs import parse_batch_sizes
    from trtprof.serving import ServingConfig
    from trtprof.serving_sweep import sweep_records
    from trtprof.spec import Precision

    model = MAKERS[name](work / f"{name}.onnx")
    sizes = parse_batch_sizes(settings["batch_sizes"])
    precisions = [Precision.parse(p) for p in args.precisions.split(",")]
    outcomes = build_engines(model, precisions, sizes,
                             settings=BuildSettings(engines_dir=work / "engines", backend=args.backend))
    built = {o.record.precision: o.record for o in outcomes}
    arms = {p.value: built[p.value] for p in precisions}
    slo = args.slo_ms or SLO_MS.get(name, 10.0)
    config = ServingConfig(concurrency=tuple(int(c) for c in settings["concurrency"].split(",")),
                           window_s=settings["window_s"], rounds=settings["rounds"], slo_ms=slo, copies=True)

    def on_point(p, r) -> None:
        print(f"  {name} {p.arm} batch {p.batch_size} x{p.concurrency} round {r + 1}: "
              f"{p.windows[-1].requests_per_s * p.batch_size:,.0f} samples/s", flush=True)

    return sweep_records(arms, sizes, config, autotune=True, on_point=on_point, stop=stop).to_json(), slo


def write_model(name: str, data: dict, slo: float, log: list, out_dir: Path, summary: list[str]) -> Path:
    """The model's results file (with the nvidia-smi cross-check), its curve and its summary lines."""
    from trtprof.cache import now_iso
    from trtprof.cli._serving import slo_lines
    from trtprof.environment import collect
    from trtprof.results import ResultSet
    from trtprof.serving_page import point_rows
    from trtprof.serving_plots import latency_throughput_figure
    from trtprof.texttable import grid

    data["nvidia_smi_cross_check"] = cross_check(data, log)
    out_json = out_dir / f"serving-{name}.json"
    ResultSet(environment=collect(), results=[], created=now_iso(), serving=[data]).write_json(out_json)
    latency_throughput_figure(data, out_dir / f"curve-{name}.png")
    summary.append(f"===== {name} (p99 target {slo:g} ms) =====")
    summary += grid(("precision", "batch", "in flight", "samples/s", "requests/s", "p50 ms", "p99 ms", "memory in use",
                     "energy/inference"), point_rows(data["points"], reasons=False))
    summary += slo_lines(data["slo"])
    for arm, acc in data["nvidia_smi_cross_check"].items():
        ratio = acc["nvml_over_smi"]
        summary.append(f"energy {arm}: NVML counter {acc['nvml_joules']:.1f} J vs nvidia-smi power x time "
                       f"{acc['smi_joules']:.1f} J over {acc['windows']} windows ({acc['smi_readings']} readings): "
                       f"ratio {ratio:.3f}; J/inference {acc['nvml_joules_per_inference']:.4g} (NVML) vs "
                       f"{acc['smi_joules_per_inference']:.4g} (nvidia-smi)"
                       if ratio else f"energy {arm}: no cross-check (no nvidia-smi readings inside the windows)")
    summary.append("")
    return out_json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=Path(os.environ.get("OUT", ROOT / "benchmarks/results"))
                    / f"gpu_serving-{dt.date.today().isoformat()}")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--precisions", default="fp32,tf32,fp16")
    ap.add_argument("--quick", action="store_true", help=f"batch {QUICK['batch_sizes']}, concurrency "
                                                         f"{QUICK['concurrency']}, {QUICK['rounds']} rounds")
    ap.add_argument("--slo-ms", type=float, default=None, help="one p99 target for every model (default: per model)")
    ap.add_argument("--backend", default="torch", help="torch (the GPU run); onnxruntime for a CPU dry run")
    ap.add_argument("--max-s", type=float, default=None,
                    help=f"bound the whole run: no point starts after MAX_S - {RESERVE_S:g} s; what finished is written")
    args = ap.parse_args(argv)
    settings = QUICK if args.quick else FULL
    started = time.monotonic()
    stopped: list[str] = []

    def out_of_time() -> bool:
        late = args.max_s is not None and time.monotonic() - started > args.max_s - RESERVE_S
        if late and not stopped:
            stopped.append(f"stopped by --max-s {args.max_s:g} after {time.monotonic() - started:.0f} s: "
                           "later points and models not measured")
            print(stopped[0], flush=True)
        return late

    from trtprof.cli import main as trtprof

    args.out_dir.mkdir(parents=True, exist_ok=True)
    log_path = args.out_dir / "nvidia-smi-power.csv"
    smi = start_power_log(log_path)
    summary: list[str] = [f"gpu_serving {dt.datetime.now().isoformat(timespec='seconds')} settings {json.dumps(settings)}"]
    swept: list[tuple[str, dict, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="gpu-serving-") as tmp:
            for name in args.models.split(","):
                if out_of_time():
                    break
                print(f"\n===== {name} =====", flush=True)
                data, slo = run_model(name, args, settings, Path(tmp), stop=out_of_time)
                if data["points"]:  # a model stopped before its first point has nothing to write
                    swept.append((name, data, slo))
    finally:
        if smi is not None:  # stopped before reading: its output reaches the file when it exits
            smi.terminate()
            smi.wait()
    log = read_power_log(log_path)
    for name, data, slo in swept:
        out_json = write_model(name, data, slo, log, args.out_dir, summary)
        trtprof(["report", str(out_json), "-o", str(args.out_dir / f"report-{name}.html")])
    text = "\n".join(summary + stopped) + "\n"
    (args.out_dir / "summary.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
