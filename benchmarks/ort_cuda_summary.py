"""The table behind issue 42's claims, from one run of benchmarks/ort_cuda_fidelity.sh (its unpacked .tgz):
per model, precision and batch size, trtprof's per-arm medians (latency and GPU compute, pooled over every
load's samples) beside the independent ORT IO-binding loop's (reference_ort_iobinding.py: compute = a
synchronised run_with_iobinding, latency = with update_inplace/.numpy() copies) and, for ResNet-50, the
plain-PyTorch CUDA-graph loop (reference_resnet50_graph.py, copies included); then each verdict's speedup
beside the references' ratios. Reads .json or .json.gz.

    python3 benchmarks/ort_cuda_summary.py benchmarks/results/ort_cuda-H200-2026-12-02
"""
from __future__ import annotations

import gzip
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def load(path: Path):
    for candidate in (path, path.with_name(path.name + ".gz")):
        if candidate.exists():
            opener = gzip.open if candidate.suffix == ".gz" else open
            with opener(candidate, "rt", encoding="utf-8") as f:
                return json.load(f)
    return None


def arm_medians(compare: dict) -> dict:
    pooled: dict = defaultdict(lambda: defaultdict(list))
    for r in compare["results"]:
        key = (r["precision"], r["batch_size"])
        pooled[key]["latency"].extend(r["samples_ms"])
        pooled[key]["compute"].extend(r["stage_samples_ms"]["compute_ms"])
    return {k: {s: statistics.median(v) for s, v in d.items()} for k, d in pooled.items()}


def torch_rows(path: Path) -> dict:
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            m = re.match(r"batch (\d+): fp32 ([\d.]+) ms\s+tf32 ([\d.]+) ms\s+fp16 ([\d.]+) ms", line)
            if m:
                b = int(m.group(1))
                rows.update({("fp32", b): float(m.group(2)), ("tf32", b): float(m.group(3)),
                             ("fp16", b): float(m.group(4))})
    return rows


def main() -> None:
    folder = Path(sys.argv[1])
    for model in ("resnet50", "vit_b16", "bert_base", "report-net"):
        compare = load(folder / f"{model}.json")
        ref = load(folder / f"{model}-ref-ort.json")
        if compare is None or ref is None:
            continue
        ref_by = {(r["precision"], r["batch"]): r for r in ref}
        torch = torch_rows(folder / f"{model}-ref-torch.txt")
        print(f"== {model}  (validity {compare['validity']['stamp']})")
        print(f"{'prec':5} {'batch':>5} | {'trtprof lat':>11} {'compute':>9} | {'ORT-ref lat':>11} {'compute':>9} "
              f"{'Δcompute':>9} | {'torch lat':>9} {'Δlat':>7}")
        medians = arm_medians(compare)
        for (prec, batch), m in sorted(medians.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            r = ref_by.get((prec, batch))
            t = torch.get((prec, batch))
            line = f"{prec:5} {batch:>5} | {m['latency']:11.4f} {m['compute']:9.4f} | "
            line += (f"{r['latency_ms']:11.4f} {r['compute_ms']:9.4f} {m['compute'] / r['compute_ms'] - 1:+9.1%} | "
                     if r else " " * 34 + "| ")
            line += f"{t:9.3f} {m['latency'] / t - 1:+7.1%}" if t else ""
            print(line)
        for c in compare["comparisons"]:
            b, base, cand = c["batch_size"], c["baseline"], c["candidate"]
            s = c["speedup"]
            r0, r1 = ref_by.get((base, b)), ref_by.get((cand, b))
            ref_ratio = r0["compute_ms"] / r1["compute_ms"] if r0 and r1 else None
            t0, t1 = torch.get((base, b)), torch.get((cand, b))
            text = (f"  batch {b}: {cand} vs {base} {s['estimate']:.3f}x [{s['ci_low']:.3f}, {s['ci_high']:.3f}] "
                    f"{c['verdict']:12} loads {c['loads']}")
            if ref_ratio:
                text += f" | ORT-ref compute ratio {ref_ratio:.3f}x ({s['estimate'] / ref_ratio - 1:+.1%})"
            if t0 and t1:
                text += f" | torch ratio {t0 / t1:.3f}x ({s['estimate'] / (t0 / t1) - 1:+.1%})"
            print(text)


if __name__ == "__main__":
    main()
