"""Where a torch-backend engine's GPU time goes, kernel by kernel, beside the plain-PyTorch reference of the
same model (issue 43: BERT-base fp16 on the torch backend is 13 % slower than transformers' own module, ViT-B/16
is not). A diagnostic, not a timing: both run eagerly under ``torch.profiler`` (CUPTI kernel times), the same
batch and precision, ``--iters`` forward passes each after a warm-up; kernels are grouped by what they compute
(GEMM, softmax, layer norm, GELU, elementwise, copies/transposes, gathers, reductions, other) and listed by
name, per forward pass, with the difference. The trtprof side loads the engine as ``bench`` does
(``measure.bench.load_runner``: the module the timing runs, fixed-shape and fused as built); the reference side
is ``reference_transformers_torch.py``'s model (it imports nothing from trtprof).

    python3 benchmarks/torch_kernel_census.py ENGINES_DIR --model bert_base --precision fp16 --batch 64 [--iters 20]
"""
from __future__ import annotations

import argparse
import re
from collections import defaultdict

import numpy as np
import torch

CATEGORIES = (  # first match wins
    ("gemm", r"gemm|sm90_xmma|cutlass|ampere_.*(h|s)\d+|wgmma|splitK|cublas|matmul"),
    ("softmax", r"softmax"),
    ("layer_norm", r"layer_norm|LayerNorm|layernorm"),
    ("gelu", r"gelu|erf"),
    ("copy/transpose", r"copy|transpose|Transpose|permute|contiguous|cat_|CatArray|direct_copy|memcpy|Memcpy"),
    ("gather/index", r"index|gather|Gather|embedding|Embedding"),
    ("reduction", r"reduce|Reduce"),
    ("elementwise", r"elementwise|vectorized|unrolled|Elementwise"),
)


def category(name: str) -> str:
    for label, pattern in CATEGORIES:
        if re.search(pattern, name, re.IGNORECASE):
            return label
    return "other"


def profile(run, iters: int) -> dict[str, tuple[float, float]]:
    """Kernel name → (calls, µs) per forward pass, from CUPTI's device times."""
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            run()
        torch.cuda.synchronize()
    table: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for event in prof.events():
        if getattr(event, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        row = table[event.name]
        row[0] += 1
        row[1] += event.time_range.elapsed_us()
    return {name: (calls / iters, us / iters) for name, (calls, us) in table.items()}


def trtprof_run(engines: str, precision: str, model: str, batch: int):
    from trtprof.engines.cache import list_engines
    from trtprof.measure.bench import load_runner

    records = [r for r in list_engines(__import__("pathlib").Path(engines)) if r.precision == precision]
    if not records:
        raise SystemExit(f"{engines}: no {precision} engine")
    runner = load_runner(records[0])
    shapes = {t.name: (batch,) + tuple(int(d) for d in t.shape[1:]) for t in runner.inputs}
    runner.prepare(shapes)
    rng = np.random.default_rng(0)
    tensors = []
    for t in runner.inputs:
        if "int" in str(t.dtype):
            host = np.ones(shapes[t.name], dtype=np.int64) if "mask" in t.name else \
                rng.integers(0, 30000, shapes[t.name], dtype=np.int64)
        else:
            host = rng.standard_normal(shapes[t.name], dtype=np.float32)
        tensors.append(torch.from_numpy(host).cuda())
    print(f"trtprof engine {records[0].key[:8]} loaded_by={runner.loaded_by} fixed_batch={runner.fixed_batch}")

    def run():
        with torch.no_grad():
            runner._run(tensors)
    return run


def reference_run(model: str, precision: str, batch: int):
    import reference_transformers_torch as ref

    torch.manual_seed(0)
    net = (ref.vit() if model == "vit_b16" else ref.bert()).eval().cuda()
    net = net.half() if precision == "fp16" else net
    feeds = ref.inputs(model, batch)
    mask = torch.zeros(batch, 1, 1, 128, dtype=torch.float16 if precision == "fp16" else torch.float32,
                       device="cuda")

    def run():
        with torch.no_grad():
            if model == "vit_b16":
                net(feeds[0].half() if precision == "fp16" else feeds[0])
            else:
                net.encoder(net.embeddings(input_ids=feeds[0]), attention_mask=mask)
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("engines")
    ap.add_argument("--model", default="bert_base")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    ours = profile(trtprof_run(args.engines, args.precision, args.model, args.batch), args.iters)
    ref = profile(reference_run(args.model, args.precision, args.batch), args.iters)
    print(f"# {args.model} {args.precision} batch {args.batch}: µs per forward pass (CUPTI), {args.iters} passes")
    cats: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for side, table in ((0, ours), (1, ref)):
        for name, (calls, us) in table.items():
            cats[category(name)][side] += us
            cats[category(name)][side + 2] += calls
    total = [sum(c[0] for c in cats.values()), sum(c[1] for c in cats.values())]
    print(f"{'category':<16} {'trtprof µs':>11} {'ref µs':>9} {'diff µs':>9} {'calls t/r':>11}")
    for label, (a, b, ca, cb) in sorted(cats.items(), key=lambda kv: kv[1][1] - kv[1][0]):
        print(f"{label:<16} {a:>11.1f} {b:>9.1f} {a - b:>+9.1f} {ca:>5.0f}/{cb:<5.0f}")
    print(f"{'total':<16} {total[0]:>11.1f} {total[1]:>9.1f} {total[0] - total[1]:>+9.1f}")
    names = set(ours) | set(ref)
    rows = sorted(names, key=lambda n: -abs(ours.get(n, (0, 0))[1] - ref.get(n, (0, 0))[1]))
    print(f"\n# kernels by |difference| (top {args.top}): trtprof calls/µs, reference calls/µs")
    for name in rows[:args.top]:
        (ca, ua), (cb, ub) = ours.get(name, (0, 0)), ref.get(name, (0, 0))
        print(f"{ua - ub:>+9.1f}  t {ca:>4.0f}/{ua:>8.1f}  r {cb:>4.0f}/{ub:>8.1f}  [{category(name)}] {name[:150]}")


if __name__ == "__main__":
    main()
