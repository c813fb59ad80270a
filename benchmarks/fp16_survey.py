"""What trtprof's FP16 conversion and FP16 range analysis find on models trtprof's authors did not
write: the onnx package's model-zoo "light" graphs, and the sample models of models/ (when built).

    PYTHONPATH=. python benchmarks/fp16_survey.py [--out benchmarks/results/fp16_survey-DATE.json]

Per model: weights clamped (|x| > 65504) / raised (0 < |x| < 2^-24) / stored as subnormals by the
conversion, what the converter's defaults (1e4, 1e-7) would have changed instead, the repairs made
around the converter, whether ONNX Runtime loads the FP16 graph, and the range analysis on the
bench inputs (seed 0, batch 1). Not a speed claim: no timing ratio is printed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FINDINGS_KEPT = 5  # per model in the results file (the counts cover all)
ROOT = HERE.parent


def models() -> list[Path]:
    import onnx

    zoo = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
    return zoo + sorted((ROOT / "models" / "build").glob("*.onnx"))


def old_defaults_would_change(model) -> dict[str, int]:
    """Values the converter's defaults (max_finite_val=1e4, min_positive_val=1e-7) change."""
    from onnx import TensorProto, numpy_helper

    from trtprof.convert.fp16_weights import _float_tensors

    clamped = raised = 0
    for _, tensor in _float_tensors(model, TensorProto.FLOAT):
        mag = np.abs(numpy_helper.to_array(tensor).astype(np.float64))
        clamped += int(np.count_nonzero(np.isfinite(mag) & (mag > 1e4)))
        raised += int(np.count_nonzero((mag > 0) & (mag < 1e-7)))
    return {"clamped_to_1e4": clamped, "raised_to_1e-7": raised}


def survey(path: Path) -> dict:
    import onnx

    from trtprof.backends.onnxruntime import ort_session
    from trtprof.convert.fp16 import convert_fp16
    from trtprof.convert.fp16range import analyze_safely
    from trtprof.model.inputs import make_inputs, resolve_shapes
    from trtprof.model.onnx_model import inspect_model
    from trtprof.spec import Precision

    model = onnx.load(str(path))
    t0 = time.perf_counter()
    conv = convert_fp16(model)
    convert_s = time.perf_counter() - t0
    try:
        ort_session(conv.model.SerializeToString(), Precision.FP16, path=path)
        loads = "yes"
    except Exception as err:  # noqa: BLE001 - recorded, not raised: this is a survey
        loads = f"no: {err}"
    info = inspect_model(path)
    feeds = make_inputs(info.inputs, resolve_shapes(info.inputs, 1, None, model_path=str(path)))
    analysis = analyze_safely(model, feeds)
    weights = conv.weights.to_json()
    return {
        "model": path.name,
        "source": "onnx package model zoo (light)" if "light_" in path.name else "models/make_models.py",
        "weights": {k: weights[k] for k in ("tensors", "values", "clamped_values", "raised_values",
                                            "subnormal_values", "subnormal_tensors", "max_abs")},
        "changes": weights["changes"],
        "converter_defaults_would_change": old_defaults_would_change(model),
        "fixes": list(conv.fixes),
        "ort_loads_fp16_graph": loads,
        "convert_s": round(convert_s, 3),
        "range": {**{k: v for k, v in analysis.to_json().items() if k not in ("largest_tensors", "thresholds")},
                  "findings": [f.to_json() for f in analysis.findings[:FINDINGS_KEPT]]},  # counts: *_risks
        "largest_tensor": (analysis.to_json()["largest_tensors"] or [None])[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    today = datetime.date.today().isoformat()
    parser.add_argument("--out", type=Path, default=HERE / "results" / f"fp16_survey-{today}.json")
    args = parser.parse_args(argv)
    import onnx
    import onnxconverter_common
    import onnxruntime

    from trtprof.system.environment import cpu_name

    rows = []
    for path in models():
        row = survey(path)
        rows.append(row)
        w, r = row["weights"], row["range"]
        print(f"{row['model']:<28} clamped {w['clamped_values']:>3}  raised {w['raised_values']:>3}  "
              f"subnormal {w['subnormal_values']:>5}  (defaults would clamp "
              f"{row['converter_defaults_would_change']['clamped_to_1e4']}, raise "
              f"{row['converter_defaults_would_change']['raised_to_1e-7']})  ORT loads: {row['ort_loads_fp16_graph'][:3]}  "
              f"range: {r['overflow_risks']} overflow, {r['underflow_risks']} underflow, "
              f"{r['analysed_tensors']}/{r['float_tensors']} tensors in {r['seconds']:.2f} s"
              + (f"  [skipped: {r['skipped']}]" if r.get("skipped") else ""))
    result = {"date": today, "device": f"CPU: {cpu_name()}", "python": sys.version.split()[0],
              "platform": platform.platform(), "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
              "onnxconverter_common": onnxconverter_common.__version__, "models": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
