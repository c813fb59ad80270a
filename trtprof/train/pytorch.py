"""The PyTorch side of ``train-compare``: ONNX → trainable module, one ``TorchTrainStep`` per arm,
the solo pass (loss curve, skipped steps, peak memory, step profile) and the reasons."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from . import memory as mem
from . import reasons as rs
from .run import ArmRun, Trainer
from .step import TorchTrainStep, TrainArm, check_arm, import_torch, load_module


class TorchTrainer(Trainer):
    framework = "torch"

    def __init__(self, model: Path, *, device: str, optimizer: str, loss: str, seed: int) -> None:
        from ..model import load_onnx

        self.model_path = Path(model)
        proto = load_onnx(self.model_path)
        self.layers = rs.tensor_core_layers(proto)  # before load_module's pre-pass changes the graph
        self.module, self.inputs, self.outputs = load_module(self.model_path, proto)
        self.device = device
        self.optimizer, self.loss, self.seed = optimizer, loss, seed

    def make_runner(self, arm: TrainArm) -> TorchTrainStep:
        check_arm(arm, self.device)
        return TorchTrainStep(self.module, arm, self.inputs, device=self.device, optimizer=self.optimizer,
                              loss=self.loss, seed=self.seed)

    def solo(self, arm: TrainArm, runner: TorchTrainStep, feeds: Mapping[str, np.ndarray], steps: int,
             reasons: bool) -> ArmRun:
        """``steps`` steps from the initial weights on the same data: loss curve, skipped steps (a
        GradScaler step whose scale went down found inf/NaN gradients and did not update), peak
        memory (GPU); then the profile passes for the reasons."""
        on_gpu = self.device == "cuda"
        before = mem.start_peak() if on_gpu else 0.0
        losses: list[float] = []
        skipped = 0 if runner.scaler is not None else None
        for _ in range(steps):
            scale = runner.scaler.get_scale() if runner.scaler is not None else None
            losses.append(float(runner.infer(feeds)["loss"][0]))
            if runner.scaler is not None and scale is not None and runner.scaler.get_scale() < scale:
                skipped = (skipped or 0) + 1
        memory = mem.read_peak(before).to_json() if on_gpu else None
        profile = rs.profile_arm(runner, runner.tensors_for(feeds)) if reasons else None
        return ArmRun(losses=losses, skipped_steps=skipped, memory=memory, profile=profile)

    def findings(self, base: ArmRun, cand: ArmRun, *,
                 peer: tuple[ArmRun, float] | None, steps: int) -> list[Any]:
        if base.profile is None or cand.profile is None:
            return []
        return rs.findings_for(base.profile, cand.profile, layers=self.layers, skipped_steps=cand.skipped_steps,
                               steps_run=steps, memory={"baseline": base.memory, "candidate": cand.memory},
                               peer=peer[0].profile if peer else None, peer_speedup=peer[1] if peer else None,
                               device=self.device)

    def max_batch(self, arm: TrainArm, make_feeds: Callable[[int], Mapping[str, np.ndarray]],
                  limit: int, *, start: int = 1, resolution: float = 0.1) -> dict[str, Any] | None:
        """Largest batch whose training step runs (``FIT_STEPS`` steps) on this GPU, per arm."""
        if self.device != "cuda":
            return None

        def fits(batch: int) -> bool:
            runner = None
            try:
                feeds = make_feeds(batch)
                runner = self.make_runner(arm)
                for _ in range(mem.FIT_STEPS):  # fitting is about memory, not about the loss value
                    runner.infer(feeds)
                return True
            except Exception as err:  # noqa: BLE001 - only an out-of-memory error means "does not fit"
                if mem.is_out_of_memory(err):
                    return False
                raise
            finally:
                if runner is not None:
                    runner.close()
                del runner
                mem.release()

        return mem.find_max_batch(fits, start=start, limit=limit, resolution=resolution).to_json()

    def environment(self) -> dict[str, Any]:
        torch = import_torch()
        env: dict[str, Any] = {"framework": "torch", "torch": torch.__version__, "device": self.device,
                               "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                               "tensor_core_layers": self.layers[:50]}
        try:
            from importlib import metadata

            env["onnx2torch"] = metadata.version("onnx2torch")
        except Exception:  # noqa: BLE001 - informational only
            env["onnx2torch"] = None
        if self.device == "cuda":
            major, minor = torch.cuda.get_device_capability(0)
            env.update({"cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                        "gpu": torch.cuda.get_device_name(0), "compute_capability": f"{major}.{minor}",
                        "bf16_supported": bool(torch.cuda.is_bf16_supported())})
        return env

    def release(self) -> None:
        if self.device == "cuda":
            mem.release()
