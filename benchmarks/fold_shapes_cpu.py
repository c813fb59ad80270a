"""Which tool folds a transformer's shape arithmetic exactly (issue 43, item 1), on the CPU.

For each model (a generated graph with the shape arithmetic torch.onnx.export writes, and transformers'
models with random weights exported by ``torch.onnx.export`` at opset 17 with a dynamic batch, the
exporter ``benchmarks/export_zoo_models.py`` uses) and batch size, the input shapes are fixed and folded by
- ``ort``: trtprof's ``convert.fixed_shapes.fold_shapes`` (ONNX Runtime, basic level, fusions off);
- ``onnxsim``: onnx-simplifier's ``simplify`` with its defaults;
- ``onnxsim-nofuse``: the same with ``perform_optimization=False`` (its fusions off);
and the folded graph is run in ONNX Runtime against the original graph on the same inputs
(``np.array_equal`` of fp32 outputs, and the max |difference|). The torch side too: the
unfolded graph converted by onnx2torch against ONNX Runtime, the folded module (constant shape
arguments baked, ``backends.torch_static``) against the unfolded one (``torch.equal``), the host-side
shape modules left, and whether ``torch.export`` captures each; for the onnxsim graphs, the folded
module against the unfolded one too (their Gemm is another kernel in PyTorch than MatMul + Add).

Needs trtprof importable, torch, onnx2torch, onnxruntime, transformers and onnxsim (not trtprof
dependencies: a throwaway environment), no GPU:

    PYTHONPATH=. python benchmarks/fold_shapes_cpu.py OUT_DIR [--models bert_tiny,vit_tiny,...] [--batches 1,4]
    python benchmarks/fold_shapes_cpu.py --table OUT_DIR/results.json      (the markdown table again)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path


def small(**extra):
    return dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, **extra)


def makers():
    import transformers as T

    return {
        "bert_tiny": (lambda: T.BertModel(T.BertConfig(vocab_size=1000, **small())), "text"),
        "bert_base": (lambda: T.BertModel(T.BertConfig()), "text"),
        "vit_tiny": (lambda: T.ViTModel(T.ViTConfig(image_size=64, patch_size=16, **small())), "image64"),
        "vit_base": (lambda: T.ViTModel(T.ViTConfig()), "image224"),
        "distilbert": (lambda: T.DistilBertModel(T.DistilBertConfig(dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                                                    vocab_size=1000)), "text"),
        "roberta": (lambda: T.RobertaModel(T.RobertaConfig(vocab_size=1000, **small())), "text"),
        "gpt2": (lambda: T.GPT2Model(T.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=1000)), "text"),
        "swin": (lambda: T.SwinModel(T.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1],
                                                  num_heads=[2, 2], window_size=4)), "image64"),
        "deit": (lambda: T.DeiTModel(T.DeiTConfig(image_size=64, patch_size=16, **small())), "image64"),
    }


def export(name: str, out: Path) -> tuple[Path, str]:
    """``name`` exported as a user does (forward by keywords, last hidden state out): the ONNX path and
    its input kind."""
    import torch

    make, kind = makers()[name]
    names = ["input_ids", "attention_mask"] if kind == "text" else ["pixel_values"]

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = make().eval()

        def forward(self, *args):
            return self.model(**dict(zip(names, args))).last_hidden_state

    if kind == "text":
        example = (torch.randint(0, 1000, (1, 32)), torch.ones(1, 32, dtype=torch.int64))
    else:
        size = int(kind.removeprefix("image"))
        example = (torch.randn(1, 3, size, size),)
    path = out / f"{name}.onnx"
    torch.manual_seed(0)
    with torch.no_grad():
        torch.onnx.export(Wrapped(), example, str(path), input_names=names, output_names=["output"], opset_version=17,
                          dynamic_axes={n: {0: "batch"} for n in names + ["output"]}, dynamo=False)
    return path, kind


def feeds_for(kind: str, batch: int):
    import numpy as np

    rng = np.random.default_rng(batch)
    if kind == "text":
        return {"input_ids": rng.integers(0, 1000, (batch, 32)).astype(np.int64),
                "attention_mask": (rng.random((batch, 32)) > 0.2).astype(np.int64)}
    if kind == "generated":
        return {"x": rng.standard_normal((batch, 4, 8)).astype(np.float32)}
    size = int(kind.removeprefix("image"))
    return {"pixel_values": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}


def run_ort(model, feeds):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def exactness(want, got) -> dict:
    import numpy as np

    return {"array_equal": all(np.array_equal(w, g) for w, g in zip(want, got)),
            "max_abs": max(float(np.abs(w.astype(np.float64) - g.astype(np.float64)).max()) for w, g in zip(want, got))}


def ops(model) -> Counter:
    from trtprof.convert.fixed_shapes import op_counts

    return op_counts(model.graph)


def fold_with(tool: str, model, shapes):
    from trtprof.convert.fixed_shapes import fix_input_shapes, fold_shapes

    if tool == "ort":
        result = fold_shapes(model, shapes)
        return result.model, result.dynamic
    import onnxsim

    simplified, ok = onnxsim.simplify(fix_input_shapes(model, shapes), perform_optimization=tool == "onnxsim")
    return simplified, "" if ok else "onnxsim's own check failed"


def torch_side(model, folded, feeds, want, *, try_export: bool = True) -> dict:
    import numpy as np
    import torch

    from trtprof.backends.torch import fold_identity_initializers, to_torch_module
    from trtprof.backends.torch_static import bake_constant_arguments, host_shape_modules

    args = tuple(torch.from_numpy(np.ascontiguousarray(v)) for v in feeds.values())
    out: dict = {}

    def exports(module) -> str:
        try:
            torch.export.export(module, args)
            return "ok"
        except Exception as err:  # noqa: BLE001 - recorded
            return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:160]}"

    unfolded_out = None
    try:
        copy = type(model)()
        copy.CopyFrom(model)
        fold_identity_initializers(copy)
        unfolded = to_torch_module(copy).eval()
        with torch.no_grad():
            unfolded_out = unfolded(*args)
        out["unfolded_vs_ort"] = exactness(want, [unfolded_out.numpy()])
        out["unfolded_host_shape_modules"] = host_shape_modules(unfolded)
        if try_export:
            out["unfolded_export"] = exports(unfolded)
    except Exception as err:  # noqa: BLE001 - an If, say: recorded
        out["unfolded"] = f"{type(err).__name__}: {str(err)[:160]}"
    fold_identity_initializers(folded)
    try:
        module = to_torch_module(folded).eval()
    except Exception as err:  # noqa: BLE001 - a fold that left an If: recorded
        out["folded"] = f"{type(err).__name__}: {str(err)[:160]}"
        return out
    out["baked"] = bake_constant_arguments(module)
    out["host_shape_modules"] = host_shape_modules(module)
    with torch.no_grad():
        got = module(*args)
    out["folded_vs_ort"] = exactness(want, [got.numpy()])
    if unfolded_out is not None:
        out["folded_vs_unfolded_torch_equal"] = bool(torch.equal(got, unfolded_out))
        out["folded_vs_unfolded_torch_max_abs"] = float((got.double() - unfolded_out.double()).abs().max())
    if try_export:
        out["export"] = exports(module)
    return out


def table(rows: list) -> str:
    """The results as a markdown table, one row per model × batch × tool."""
    def exact(e: dict) -> str:
        return "equal" if e["array_equal"] else f"max {e['max_abs']:.2g}"

    lines = ["| model | batch | tool | nodes | shape ops left | ops added | ORT: folded vs original | "
             "torch: folded module vs unfolded | torch: folded module vs ORT | torch.export folded / unfolded |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['tool']} | error: {r['error'][:80]} | | | | | | |")
            continue
        t = r.get("torch", {})
        if "folded_vs_unfolded_torch_equal" in t:
            torch_eq = "equal" if t["folded_vs_unfolded_torch_equal"] else f"max {t['folded_vs_unfolded_torch_max_abs']:.2g}"
        elif "unfolded" in t:
            torch_eq = "unfolded does not convert" + (" (If)" if "If" in t["unfolded"] else "")
        else:
            torch_eq = "—"
        if "folded" in t:
            torch_eq = "folded does not convert" + (" (If)" if "If" in t["folded"] else "")
        vs_ort = exact(t["folded_vs_ort"]) if "folded_vs_ort" in t else "—"
        exports = (f"{t['export'][:40]} / {t.get('unfolded_export', '—')[:60]}" if "export" in t else "—")
        left = ", ".join(f"{k} {v}" for k, v in r["shape_ops_left"].items()) or "none"
        added = ", ".join(f"{k} +{v}" for k, v in r["ops_added"].items()) or "none"
        lines.append(f"| {r['model']} | {r['batch']} | {r['tool']} | {r['nodes_before']} → {r['nodes_after']} | {left} | "
                     f"{added} | {exact(r['ort_exact'])} | {torch_eq} | {vs_ort} | {exports} |")
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["--table"]:
        print(table(json.loads(Path(sys.argv[2]).read_text())))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default="generated,bert_tiny,vit_tiny,bert_base,vit_base,distilbert,roberta,gpt2,"
                                            "swin,deit")
    parser.add_argument("--batches", default="1,4")
    parser.add_argument("--tools", default="ort,onnxsim,onnxsim-nofuse")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import onnx

    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        if name == "generated":
            from tests.convert.shape_graphs import shape_arithmetic_model

            model, kind = shape_arithmetic_model(), "generated"
        else:
            t0 = time.perf_counter()
            path, kind = export(name, args.out)
            print(f"exported {name} in {time.perf_counter() - t0:.1f} s", flush=True)
            model = onnx.load(str(path))
        for batch in (int(b) for b in args.batches.split(",")):
            feeds = feeds_for(kind, batch)
            shapes = {k: v.shape for k, v in feeds.items()}
            want = run_ort(model, feeds)
            for tool in args.tools.split(","):
                t0 = time.perf_counter()
                try:
                    folded, why = fold_with(tool, model, shapes)
                except Exception as err:  # noqa: BLE001 - recorded
                    rows.append({"model": name, "batch": batch, "tool": tool, "error": f"{type(err).__name__}: {err}"[:300]})
                    continue
                seconds = time.perf_counter() - t0
                before, after = ops(model), ops(folded)
                row = {"model": name, "batch": batch, "tool": tool, "seconds": round(seconds, 3), "left_alone": why,
                       "nodes_before": sum(before.values()), "nodes_after": sum(after.values()),
                       "shape_ops_left": {op: after[op] for op in ("Shape", "Size", "ConstantOfShape", "Range", "If")
                                          if after[op]},
                       "ops_added": dict(after - before),
                       "ort_exact": exactness(want, run_ort(folded, feeds))}
                if not why:  # the torch side of every tool's graph; torch.export tried on trtprof's (ort)
                    row["torch"] = torch_side(model, folded, feeds, want, try_export=tool == "ort")
                rows.append(row)
                print(json.dumps(row), flush=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    (args.out / "table.md").write_text(table(rows) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
