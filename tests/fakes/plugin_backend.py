"""A backend from OUTSIDE trtprof's package, registered only through the ``trtprof.backends`` entry point
(tests/backends/test_plugin_backend.py): it proves that a new backend is one module, with no other module of
trtprof changed. A FAKE runtime for the contract, not a product backend: its runner is onnx's reference
evaluator (``onnx.reference.ReferenceEvaluator``, numpy), timed by trtprof's host loop; its per-layer profile
is ONNX Runtime's session profiler on the same ONNX artifact, which its capabilities say it may use."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Mapping

from trtprof.backends.base import Availability, BackendBase, BuildReport, Capabilities
from trtprof.errors import UnsupportedPrecision
from trtprof.spec import BuildSpec, Precision


class ReferenceRunner:
    device = "cpu"

    def __init__(self, path: Path, inputs: tuple, outputs: tuple) -> None:
        from onnx.reference import ReferenceEvaluator

        self._evaluator = ReferenceEvaluator(str(path))
        self.inputs, self.outputs = inputs, outputs
        self._names = [o.name for o in outputs]

    def infer(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        return dict(zip(self._names, self._evaluator.run(self._names, dict(feeds))))

    def close(self) -> None:
        self._evaluator = None


class PluginBackend(BackendBase):
    name = "numpy-reference"
    artifact_suffix = ".onnx"
    capabilities = Capabilities(device="cpu", batch_independent=True, layer_profiler="ort-session",
                                timeline="ort-session")

    def available(self) -> Availability:
        return Availability(True)

    def check_precision(self, precision: Precision) -> None:
        if precision not in (Precision.FP32, Precision.FP16):
            raise UnsupportedPrecision(f"{precision.value} is not available on the numpy-reference plugin")

    def environment(self) -> dict[str, Any]:
        import onnx

        return {"backend": self.name, "onnx": onnx.__version__, "device": "numpy"}

    def build(self, model: Path, spec: BuildSpec, out: Path) -> BuildReport:
        if spec.precision is Precision.FP16:
            import onnx

            from trtprof.convert.fp16 import convert_fp16

            conversion = convert_fp16(onnx.load(str(model)))
            out.write_bytes(conversion.model.SerializeToString())
            return BuildReport(metadata={"effective_precision": "fp16"}, notes=list(conversion.notes))
        shutil.copyfile(model, out)
        return BuildReport(metadata={"effective_precision": "fp32"})

    def load(self, artifact: Path, record: Any) -> ReferenceRunner:
        return ReferenceRunner(Path(artifact), record.inputs, record.outputs)
