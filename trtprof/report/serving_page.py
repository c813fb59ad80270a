"""The report's sections for the deployer's questions (issue 24): memory and size per engine, and
(with ``--concurrency``) the latency–throughput curves and throughput at a latency target.

Kept apart from ``trtprof.report.compare_page`` so the page assembly only calls ``sections(data)``."""
from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from .kit import breakable, esc, table
from .stamp import validity_html
from ..util.labels import fmt_ms, fmt_rate


def memory_rows(results: Sequence[Any]) -> list[list[str]]:
    from ..util.labels import engine_labels
    from ..system.memory import fmt_bytes, fmt_in_use

    rows = []
    for r, label in zip(results, engine_labels(results)):
        rows.append([label, str(r.batch_size), fmt_bytes(r.engine.get("artifact_bytes")),
                     fmt_in_use(r.memory), str(r.memory.get("kind", "n/a")),
                     str(r.memory.get("resolution") or r.memory.get("method") or r.memory.get("reason") or "")])
    return rows


def max_batch_part(found: Sequence[Mapping[str, Any]]) -> str:
    """``bench --find-max-batch``: per engine the largest batch that fits, and how it was decided."""
    from ..measure.maxbatch import fit_line

    if not found:
        return ""
    items = "".join(f"<li>{html.escape(fit_line(f))}<br><small>{html.escape(str(f.get('method', '')))}</small></li>"
                    for f in found)
    return f"<h3>Largest batch that fits</h3><ul>{items}</ul>"


def memory_section(results: Sequence[Any], max_batch: Sequence[Mapping[str, Any]] = ()) -> str:
    rows = memory_rows(results)
    fits = max_batch_part(max_batch)
    if not fits and (not rows or not any(r.engine.get("artifact_bytes") is not None or r.memory for r in results)):
        return ""
    return ("<h2>Memory and size</h2><p>Artifact bytes on disk and memory in use while the engine infers "
            "(what each backend can measure; see the last column).</p>"
            + table(("engine", "batch", "artifact", "memory in use", "measured as", "method"), rows) + fits)


def _figure_b64(sweep: Mapping[str, Any]) -> str:
    import base64
    import tempfile
    from pathlib import Path

    from .serving_plots import latency_throughput_figure

    with tempfile.TemporaryDirectory(prefix="trtprof-serving-") as tmp:
        path = latency_throughput_figure(sweep, Path(tmp) / "curve.png")
        return base64.b64encode(path.read_bytes()).decode("ascii")


def point_rows(points: Sequence[Mapping[str, Any]], *, reasons: bool = True) -> list[list[str]]:
    """One row per point (the report's table and ``bench``/``compare``'s printed one; ``reasons``
    False leaves out why energy is n/a, which the JSON and the page say)."""
    from ..system.memory import fmt_in_use

    rows = []
    for p in points:
        if p.get("failed") and not p.get("rounds"):
            rows.append([p["arm"], str(p["batch_size"]), str(p["concurrency"]), "–", "–", "–", "–", p["failed"], "–"])
            continue
        e = p.get("energy") or {}
        energy = (f"{e['joules_per_inference']:.3g} J, {e['avg_power_w']:.0f} W"
                  if e.get("joules_per_inference") is not None
                  else f"n/a ({e.get('reason', 'not measured')})" if reasons else "n/a")
        rows.append([p["arm"], str(p["batch_size"]), str(p["concurrency"]), fmt_rate(p['samples_per_s']),
                     fmt_rate(p['requests_per_s']), fmt_ms(p['latency_ms']['p50']), fmt_ms(p['latency_ms']['p99']),
                     fmt_in_use(p.get("memory") or {}), energy])
    return rows


def slo_section(slo: Mapping[str, Any]) -> str:
    target = slo["slo_p99_ms"]
    rows = []
    for arm, best in slo["best"].items():
        if "reason" in best:
            rows.append([arm, "–", "–", "–", "–", best["reason"]])
        else:
            rows.append([arm, str(best["batch_size"]), str(best["concurrency"]), fmt_rate(best['samples_per_s']),
                         f"{best['p99_ms']:.4g}", ""])
    verdicts = []
    for v in slo["verdicts"]:
        if "ci_low" in v:
            text = (f"{v['candidate']} vs {v['baseline']}: {v['estimate']:.3f}× the throughput, 95 % CI "
                    f"[{v['ci_low']:.3f}, {v['ci_high']:.3f}], {v['verdict']} ({v['rounds']} rounds)")
        elif "estimate" in v:  # too few rounds for an interval: the ratio, and no CI printed
            text = f"{v['candidate']} vs {v['baseline']}: {v['estimate']:.3f}× the throughput, {v['verdict']}"
        else:
            text = f"{v['candidate']} vs {v['baseline']}: {v['verdict']}"
        if v.get("reason"):
            text += f" — {v['reason']}"
        verdicts.append(f"<li><b>{html.escape(text)}</b></li>")
    return (f"<h2>Throughput at p99 ≤ {target:g} ms</h2><p>{html.escape(slo['method'])}.</p>"
            + table(("precision", "batch", "in flight", "samples/s", "p99 ms", "why none"), rows)
            + f"<ul>{''.join(verdicts)}</ul>")


def energy_note(points: Sequence[Mapping[str, Any]]) -> str:
    """The one reason energy was not measured, when every measured point shares it ("CPU backend: …"): said
    once above the table, whose cells then read "n/a"; '' when any point has energy or the reasons differ."""
    energies = [p.get("energy") or {} for p in points if not (p.get("failed") and not p.get("rounds"))]
    reasons = {str(e.get("reason", "not measured")) for e in energies}
    if not energies or any(e.get("joules_per_inference") is not None for e in energies) or len(reasons) != 1:
        return ""
    return reasons.pop()


def serving_section(sweep: Mapping[str, Any]) -> str:
    settings = sweep.get("settings", {})
    no_energy = energy_note(sweep["points"])
    parts = ["<h2>Throughput under concurrency</h2>", validity_html(sweep.get("validity"), "serving"),
             f"<p>Closed loop: N requests in flight (N threads; on a GPU each with its own stream and execution "
             f"context), {esc(settings.get('rounds'))} rounds of {esc(settings.get('window_s'))} s windows per point, "
             f"interleaved across precisions. Throughput: median over rounds; latency: per request, "
             f"pooled.</p>",
             f'<img alt="latency vs throughput" src="data:image/png;base64,{_figure_b64(sweep)}">',
             f"<p>Energy per inference: n/a at every point ({breakable(no_energy)}).</p>" if no_energy else "",
             table(("precision", "batch", "in flight", "samples/s", "requests/s", "p50 ms", "p99 ms",
                    "memory in use", "energy per inference"), point_rows(sweep["points"], reasons=not no_energy))]
    fits = sweep.get("fits") or {}
    if any(f["did_not_fit"] for f in fits.values()):
        items = "".join(f"<li>{html.escape(arm)}: largest batch measured {esc(f['largest_batch_measured'])}; did not fit: "
                        + html.escape(", ".join(f"batch {d['batch_size']} ×{d['concurrency']}" for d in f["did_not_fit"])
                                      or "none") + "</li>" for arm, f in fits.items())
        parts.append(f"<h3>What fits in memory</h3><ul>{items}</ul>")
    if sweep.get("slo"):
        parts.append(slo_section(sweep["slo"]))
    return "".join(parts)


def sections(data: Mapping[str, Any]) -> list[str]:
    """HTML sections for a compare or bench JSON already loaded by ``report.load``."""
    parts = [memory_section(data.get("parsed_results", []), data.get("max_batch") or [])]
    serving = data.get("serving")
    sweeps = serving if isinstance(serving, list) else [serving] if serving else []
    parts += [serving_section(s) for s in sweeps if s.get("points")]
    return [p for p in parts if p]


def sweep_summary(sweep: Mapping[str, Any]) -> list[str]:
    """A sweep in the Markdown summary: how many points, then its throughput-at-target and fit lines."""
    found = slo_lines(sweep.get("slo")) + fit_lines(sweep.get("fits"))
    head = ["", f"Serving sweep: {len(sweep.get('points', []))} points (per-point tables and the "
                "latency–throughput figure: the HTML report)"]
    return head + ([""] + [f"- {x}" for x in found] if found else [])


def slo_lines(slo: Mapping[str, Any] | None) -> list[str]:
    """The throughput-at-target lines of a sweep's ``slo`` entry (per arm its best point, then the verdicts)."""
    if not slo:
        return []
    target = slo["slo_p99_ms"]
    lines = []
    for arm, best in slo["best"].items():
        if "reason" in best:
            lines.append(f"at p99 <= {target:g} ms: {arm}: {best['reason']}")
        else:
            lines.append(f"at p99 <= {target:g} ms: {arm}: {fmt_rate(best['samples_per_s'])} samples/s "
                         f"(batch {best['batch_size']}, concurrency {best['concurrency']}, p99 {best['p99_ms']:.4g} ms)")
    for v in slo["verdicts"]:
        if "ci_low" in v:
            lines.append(f"at p99 <= {target:g} ms: {v['candidate']} vs {v['baseline']}: {v['estimate']:.3f}× the "
                         f"throughput [95% CI {v['ci_low']:.3f}, {v['ci_high']:.3f}] {v['verdict'].upper()} "
                         f"({v['rounds']} rounds)" + (f"; {v['reason']}" if v.get("reason") else ""))
        elif "estimate" in v:
            lines.append(f"at p99 <= {target:g} ms: {v['candidate']} vs {v['baseline']}: {v['estimate']:.3f}× the "
                         f"throughput {v['verdict'].upper()}: {v['reason']}")
        else:
            lines.append(f"at p99 <= {target:g} ms: {v['candidate']} vs {v['baseline']}: {v['verdict'].upper()}: "
                         f"{v['reason']}")
    return lines


def fit_lines(fits: Mapping[str, Any] | None) -> list[str]:
    """Per precision the largest batch that fitted, when some point ran out of memory."""
    if not fits or not any(f["did_not_fit"] for f in fits.values()):
        return []
    lines = []
    for arm, f in fits.items():
        failed = ", ".join(f"batch {d['batch_size']} ×{d['concurrency']}" for d in f["did_not_fit"]) or "none"
        lines.append(f"memory: {arm}: largest batch measured {f['largest_batch_measured']}; did not fit: {failed}")
    return lines
