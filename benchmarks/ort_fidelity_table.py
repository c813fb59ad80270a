"""trtprof's onnxruntime-cuda numbers beside the independent ORT loop's of the same call (issue 42): per arm,
trtprof's median GPU compute against the reference's serial and back-to-back times per run
(``reference_ort_iobinding.py``), and per comparison trtprof's verdict (latency with pinned copies), its compute
ratio and the reference's back-to-back ratio; then, for a lone-loads run, its lives (``budget.lives``: what the run
waited for each, its engines, priming by part, serving, whether it read the shared inputs) and their sums.

    python3 benchmarks/ort_fidelity_table.py TRTPROF.json[.gz] REF-ORT.json [TRTPROF.json REF.json …]
"""
from __future__ import annotations

import gzip
import json
import statistics
import sys


def read(path: str):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def table(trtprof_path: str, ref_path: str) -> list[str]:
    data, ref = read(trtprof_path), read(ref_path)
    arms = {(r["precision"], r["batch_size"]): statistics.median(r["stage_samples_ms"]["compute_ms"])
            for r in data["results"]}
    refs = {(r["precision"], r["batch"]): r for r in ref}
    lines = [f"# {trtprof_path} against {ref_path}"]
    for (precision, batch), compute in sorted(arms.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        r = refs[(precision, batch)]
        b2b = r.get("back_to_back_ms")
        lines.append(f"{precision:5s} b{batch:<4d} trtprof compute {compute:9.4f} ms | ref serial {r['compute_ms']:9.4f}"
                     + (f" back-to-back {b2b:9.4f} ms | trtprof/back-to-back {compute / b2b:.4f}" if b2b else
                        f" ms | trtprof/serial {compute / r['compute_ms']:.4f}"))
    for c in data["comparisons"]:
        b, cand, base = c["batch_size"], c["candidate"], c["baseline"]
        mine = arms[(base, b)] / arms[(cand, b)]
        key = "back_to_back_ms" if "back_to_back_ms" in refs[(base, b)] else "compute_ms"
        theirs = refs[(base, b)][key] / refs[(cand, b)][key]
        lines.append(f"b{b:<4d} {cand} vs {base}: verdict {c['speedup']['estimate']:.3f}x | trtprof compute ratio "
                     f"{mine:.3f}x | reference ({key}) {theirs:.3f}x | compute ratio / reference {mine / theirs:.4f}")
    return lines + lives(data)


# what a life's record says it did, named in its line where true
FLAGS = (("inputs_shared", "shared inputs"), ("started_ahead", "started ahead"),
         ("engines_told_ahead", "engines told ahead"), ("first_runs_side_by_side", "first runs side by side"),
         ("exit_beside_next_load", "exit beside the next load"))


def lives(data: dict) -> list[str]:
    """One line per life of a lone-loads run (``budget.lives``), then the sums; nothing for other runs."""
    got = (data.get("budget") or {}).get("lives") or []
    lines = []
    for life in got:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in (life.get("priming") or {}).items())
        lines.append(f"life {life['life']}: waited {life.get('waited_s') or 0:.2f} s (engines {life.get('engines_s') or 0:.2f}, "
                     f"priming {life.get('priming_s') or 0:.2f}: {parts}) serving {life.get('serving_s') or 0:.2f} s"
                     + "".join(f", {label}" for key, label in FLAGS if life.get(key)))
    if got:
        lines.append(f"lives: {len(got)}, waited {sum(x.get('waited_s') or 0 for x in got):.1f} s, serving "
                     f"{sum(x.get('serving_s') or 0 for x in got):.1f} s")
    return lines


def main() -> None:
    args = sys.argv[1:]
    if not args or len(args) % 2:
        raise SystemExit(__doc__)
    for i in range(0, len(args), 2):
        print("\n".join(table(args[i], args[i + 1])))


if __name__ == "__main__":
    main()
