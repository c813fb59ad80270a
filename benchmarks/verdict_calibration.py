"""Calibration of compare's verdicts: the REAL loop (interleave.run_interleaved → speedup) driven by
simulated runners of known truth on a simulated clock (trtprof.measure.simulate), at the default plan.

Per case and true ratio it prints: replicates, the verdict shares, the decisive rate (faster or
slower: for a true 1.0 the false-alarm rate), the coverage of the true ratio by the 95 % CI, the
median CI width, median rounds and loads used, the median simulated seconds, and the wall time.
The column ``w/s`` is the median CI half-width over 1.96 × the replicate-to-replicate SD of the
estimate (issue 27: the schema-2 intervals were 1.7–3× the run-to-run spread; a t interval over 6–7
loads is ~1.2–1.3× by its quantile alone). ``unseen`` (lopsided cases) is the share of replicates
whose loads never drew the slow mode: no interval built on those loads can know of it.
``early stops (coverage)``: the share of replicates that stopped before the budget (decisive or
at the target width) and their coverage, then the coverage of the rest: a stopping rule that selects
on the data the interval uses shows as a gap between the two.
Then the criteria: A/A decisive rate ≤ 5 %, coverage ≥ 94 % everywhere (each with the one-sided
binomial p of a coverage that low if the truth were 94 %: at 500 replicates a row of true 95 %
coverage shows below 94 % one time in eight, at 2000 one in fifty; 2000 replicates take 10–25 s a
row), a true 1.05 at 10 % noise called faster ≥ 80 %, and (issue 27) for the lopsided cases:
covered or ``inconclusive`` ≥ 94 %.

    PYTHONPATH=. python benchmarks/verdict_calibration.py --replicates 500 \
        --out benchmarks/results/verdict_calibration-2026-12-01
"""
from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes import simulate as cal  # noqa: E402  (runners of known truth: test code, not shipped)
from trtprof.measure.interleave import MAX_LOADS, RoundPlan  # noqa: E402
from trtprof.stats.speedup import FASTER  # noqa: E402


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def command_line() -> str:
    """How this table was made, to paste back into a shell (the repository root as the directory)."""
    return "PYTHONPATH=. python benchmarks/verdict_calibration.py " + shlex.join(sys.argv[1:])


def wilson_interval(rate: float, n: int) -> tuple[float, float]:
    """95 % Wilson score interval of a rate from n replicates (scipy): the table's sampling noise."""
    from scipy import stats as sps

    ci = sps.binomtest(round(rate * n), n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def early_stops(by_stop: dict[str, dict[str, float]]) -> str:
    """Share of replicates that stopped before the budget, and their coverage; then the rest's."""
    early = {k: v for k, v in by_stop.items() if k != "time_budget"}
    share = sum(v["share"] for v in early.values())
    rest = by_stop.get("time_budget")
    if share == 0:
        return f"0.0%; rest {rest['coverage']:.1%}" if rest else "0.0%"
    cov = sum(v["share"] * v["coverage"] for v in early.values()) / share
    return f"{share:.1%} ({cov:.1%})" + (f"; rest {rest['coverage']:.1%}" if rest else "")


def below_p(rate: float, n: int, figure: float) -> float:
    """One-sided exact binomial p-value (scipy) of a rate this low if the true rate were ``figure``:
    at 500 replicates a true 95 % coverage shows below 94 % in 13 % of rows (binomial), so a FAIL with
    a large p is the table's sampling noise, not evidence of under-coverage."""
    from scipy import stats as sps

    return float(sps.binomtest(round(rate * n), n, figure, alternative="less").pvalue)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicates", type=int, default=500)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.txt")
    ap.add_argument("--only", default="", help="case names to run, separated by ';' (or by ',' when no name has "
                                                "one; 'one-engine burst, 2 rounds' does) (default: every case)")
    ap.add_argument("--min-loads", type=int, default=None,
                    help="RoundPlan.min_loads for every row (default: the default plan's); what more loads buy the "
                         "lopsided cases")
    ap.add_argument("--ratios", default="", help="comma list of true ratios to run, e.g. 1.05 (default: 1.0 and 1.05)")
    args = ap.parse_args()

    plan = RoundPlan() if args.min_loads is None else RoundPlan(min_loads=args.min_loads,
                                                                 max_loads=max(MAX_LOADS, args.min_loads))
    started = time.perf_counter()
    lines = [f"verdict calibration: {args.replicates} replicates per row, "
             f"{'default plan' if args.min_loads is None else 'plan'} {plan.to_json()}",
             f"machine: {platform.node()} ({cpu_name()}), python {platform.python_version()}, "
             f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}",
             f"command: {command_line()}",
             "truth = E_load[median baseline] / E_load[median candidate] (see trtprof/measure/simulate.py)", ""]
    header = (f"{'case':28s} {'truth':>6s} {'reps':>5s} {'faster':>7s} {'slower':>7s} {'equiv':>7s} {'inconc':>7s} "
              f"{'decisive':>8s} {'coverage':>8s} {'med width':>9s} {'w/s':>5s} {'rounds':>6s} {'loads':>5s} {'sim s':>6s} "
              f"{'wall s':>7s} {'early stops (coverage)':>22s}")
    lines.append(header)
    print("\n".join(lines), flush=True)
    rows = []
    only = set(filter(None, args.only.split(";" if ";" in args.only else ",")))
    wanted_ratios = [float(x) for x in args.ratios.split(",") if x]
    for k, case in enumerate(cal.CASES):
        if only and case.name not in only:
            continue
        ratios = (1.0,) if case.bimodal is not None else (1.0, 1.05)
        for ratio in ratios:
            if wanted_ratios and not any(abs(ratio - w) < 1e-9 for w in wanted_ratios):
                continue
            s = cal.summarize_case(case, ratio, args.replicates, seed=args.seed + 17 * k + int(ratio * 100), plan=plan)
            row = s.to_json() | {"ratio": ratio}
            rows.append(row)
            v = s.verdicts
            line = (f"{s.case:28s} {s.truth:6.3f} {s.replicates:5d} {v['faster']:7.1%} {v['slower']:7.1%} "
                    f"{v['equivalent']:7.1%} {v['inconclusive']:7.1%} {s.decisive_rate:8.1%} {s.coverage:8.1%} "
                    f"{s.median_width:9.4f} {s.extra['width_over_spread']:5.2f} {s.median_rounds:6.0f} "
                    f"{s.median_loads:5.0f} {s.median_sim_s:6.1f} {s.wall_s:7.1f} {early_stops(s.extra['coverage_by_stop']):>22s}")
            lines.append(line)
            print(line, flush=True)

    checks = []
    for r in rows:
        aa = r["truth"] == 1.0
        if aa:
            low, high = wilson_interval(r["decisive_rate"], r["replicates"])
            checks.append((f"A/A decisive rate ≤ 5 %: {r['case']} (95 % Wilson [{low:.1%}, {high:.1%}])",
                           r["decisive_rate"] <= 0.05, r["decisive_rate"]))
        floor = 0.94
        low, high = wilson_interval(r["coverage"], r["replicates"])
        below = below_p(r["coverage"], r["replicates"], floor)
        checks.append((f"coverage ≥ {floor:.0%}: {r['case']} (truth {r['truth']:.3f}; replicate noise: 95 % "
                       f"Wilson [{low:.1%}, {high:.1%}]; p = {below:.2g} that a true {floor:.0%} shows this low)",
                       r["coverage"] >= floor, r["coverage"]))
        if "covered_or_inconclusive" in r["extra"]:
            ok = r["extra"]["covered_or_inconclusive"]
            checks.append((f"covered or inconclusive ≥ 94 %: {r['case']} (truth {r['truth']:.3f}; slow mode never drawn "
                           f"in {r['extra']['unseen']:.1%})", ok >= floor, ok))
            drawn = r["extra"]["covered_or_inconclusive_when_drawn"]
            checks.append((f"covered or inconclusive ≥ 94 % where some load drew the slow mode: {r['case']} (truth "
                           f"{r['truth']:.3f})", drawn >= floor, drawn))
    power = next((r for r in rows if r["case"] == "stationary 10 %" and r["ratio"] == 1.05), None)
    if power is not None:
        checks.append(("true 1.05 at 10 % noise called faster ≥ 80 %", power["verdicts"][FASTER] >= 0.80,
                       power["verdicts"][FASTER]))
    lines.append("")
    for name, ok, value in checks:
        lines.append(f"{'PASS' if ok else 'FAIL'}  {name}  ({value:.1%})")
    lines.append(f"total wall time {time.perf_counter() - started:.0f} s")
    print("\n".join(lines[-len(checks) - 2:]), flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
        args.out.with_suffix(".json").write_text(json.dumps({
            "machine": {"node": platform.node(), "cpu": cpu_name(), "python": platform.python_version()},
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": command_line(),
            "replicates": args.replicates,
            "plan": plan.to_json(), "rows": rows,
            "checks": [{"check": n, "pass": ok, "value": v} for n, ok, v in checks]}, indent=1) + "\n")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
