"""Result files with the long tokens real models produce (issue 44: a 1,137-character ``--layer-precisions``
list made one compare page 9,941 px wide): a fix-fp16 file whose keep-list and predicted FP16 findings name
26 transformer nodes. Built from ``test_report.synthetic_compare_json`` (the real report writer), with the
blocks ``compare.fix_fp16.Search.to_json`` and ``convert.fp16range`` write. Not a test module."""
from __future__ import annotations

import json
from pathlib import Path

from .test_report import synthetic_compare_json

NODES = [f"/model/encoder/layer.{i}/attention/self/MatMul_{i % 3}" for i in range(26)]
OPTION = "--layer-precisions " + ",".join(f"{n}:fp32" for n in NODES)


def long_keep_list_fix(tmp_path: Path) -> Path:
    """A fix-fp16 result whose keep-list is ``NODES`` (its ``--layer-precisions`` value over 1,100 characters)."""
    path = synthetic_compare_json(tmp_path)
    data = json.loads(path.read_text())
    for c in data["comparisons"]:
        c["accuracy"]["predicted"] = {
            "summary": f"{len(NODES)} overflow risks in FP16 (range analysis of the FP32 model)",
            "findings": [{"kind": "overflow", "node": n, "covered": False,
                          "message": f"{n}: max |value| 9.1e+04 > 65504"} for n in NODES],
            "suggested_option": OPTION}
    data["fix_fp16"] = {"budget": "cosine>=0.999", "evaluation": "engine", "inputs": "random inputs (seed 0)",
                        "nodes": 400, "max_builds": 24, "builds": 3, "keep": NODES, "found": True,
                        "option": OPTION, "stopped": None, "model": "models/bert-base-uncased.onnx", "trials": []}
    out = tmp_path / "fix-long.json"
    out.write_text(json.dumps(data))
    return out
