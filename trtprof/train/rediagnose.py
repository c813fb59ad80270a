"""Re-derive the reasons of a ``train-compare`` JSON from the evidence stored in it.

Why: the reasons are rules over stored measurements (phase times, kernel names and times, memory,
skipped steps, layer channel counts). When a rule or the kernel-name classifier is corrected, the
same measurements can be re-read without re-running a GPU; the timings and verdicts are untouched.
The output says that it was re-derived, by which code, and how many kernel names changed class.

    python -m trtprof.train.rediagnose IN.json OUT.json
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any, Mapping

from . import reasons as rs
from .run import training_notes


def rediagnose(data: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(data))
    layers = (out.get("environment", {}).get("backend", {}) or {}).get("tensor_core_layers", [])
    device = out.get("device", "cuda")
    changed = 0
    profiles: dict[tuple[int, str], rs.StepProfile] = {}
    for b in out.get("batches", []):
        for arm, run in b["arms"].items():
            if run.get("profile"):
                prof = rs.profile_from_json(run["profile"])
                changed += rs.reclassify(prof)
                run["profile"] = prof.to_json()
                profiles[(b["batch_size"], arm)] = prof
    medians = {b["batch_size"]: b["median_step_ms"] for b in out.get("batches", [])}
    runs = {(b["batch_size"], arm): run for b in out.get("batches", []) for arm, run in b["arms"].items()}
    for c in out.get("comparisons", []):
        batch, base, cand = c["batch_size"], c["baseline"], c["candidate"]
        if (batch, base) not in profiles or (batch, cand) not in profiles:
            continue
        peer = None
        if cand == "amp-bf16" and (batch, "amp-fp16") in profiles:
            peer = profiles[(batch, "amp-fp16")], medians[batch]["amp-fp16"] / medians[batch]["amp-bf16"]
        run = rs.RunFacts(steps_run=runs[(batch, cand)].get("steps", 0),
                          skipped_steps=runs[(batch, cand)].get("skipped_steps"), timed_ms=medians[batch].get(cand),
                          memory={"baseline": runs[(batch, base)].get("memory"),
                                  "candidate": runs[(batch, cand)].get("memory")},
                          device=device, autotune=out.get("settings", {}).get("cudnn_benchmark"))
        findings = rs.findings_for(profiles[(batch, base)], profiles[(batch, cand)], run, layers=layers, peer=peer)
        c["diagnosis"] = [f.to_json() for f in findings]
        if "timing_notes" in c:
            c["timing_notes"] = {side: training_notes(notes) for side, notes in c["timing_notes"].items()}
    out["rediagnosed"] = {"by": "trtprof.train.rediagnose", "kernel_names_reclassified": changed,
                          "note": "reasons re-derived from the stored evidence; timings and verdicts unchanged"}
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m trtprof.train.rediagnose IN.json OUT.json", file=sys.stderr)
        return 2
    data = rediagnose(json.loads(Path(args[0]).read_text(encoding="utf-8")))
    from .run import write_json

    write_json(data, Path(args[1]))
    print(f"{args[1]}: {data['rediagnosed']['kernel_names_reclassified']} kernel names reclassified")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
