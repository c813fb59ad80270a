"""The PyTorch side of ``train-compare``: the user's module (a factory) or ONNX → trainable module,
one ``TorchTrainStep`` per arm, the solo pass (loss curve, skipped steps, peak memory and what it is
made of, step profile) and the reasons."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..backends.torch import TorchBackend
from ..measure.maxbatch import find_max_batch
from ..system.preflight import is_out_of_memory
from . import memory as mem
from . import reasons as rs
from .run import ArmRun, Trainer, TrainOptions
from .step import StepSettings, TorchTrainStep, TrainArm, check_arm, import_torch, load_module

TUNE_STEPS = 2  # cuDNN times its algorithms on the first step of a shape; the second confirms the choice


def step_settings(options: TrainOptions, loss_fn: Callable[[Any], Any] | None = None,
                  optimizer_fn: Callable[[Any], Any] | None = None) -> StepSettings:
    """``options``' step settings (optimizer, loss, seed, autotune), with a factory's own loss/optimizer."""
    return StepSettings(optimizer=options.optimizer, loss=options.loss, seed=options.seed, autotune=options.autotune,
                        loss_fn=loss_fn, optimizer_fn=optimizer_fn)


class TorchTrainer(Trainer):
    framework = TorchBackend.name  # it trains the torch backend's module (results: "<framework>-train")
    cudnn_autotune = True

    def __init__(self, module: Any, inputs: tuple, *, device: str, settings: StepSettings,
                 layers: list[dict[str, Any]] | None = None, source: dict[str, Any] | None = None) -> None:
        self.module, self.inputs = module, tuple(inputs)
        self.layers = layers if layers is not None else rs.module_tensor_core_layers(module)
        self.source = source or {}
        self.device = device
        self.settings, self.autotune = settings, settings.autotune

    @classmethod
    def from_onnx(cls, model: Path, *, device: str, options: TrainOptions) -> "TorchTrainer":
        """ONNX → onnx2torch module; the source records what an inference export loses for training."""
        from ..model.onnx_model import load_onnx
        from .onnx_source import training_layers

        path = Path(model)
        proto = load_onnx(path)
        layers = rs.tensor_core_layers(proto)  # before load_module's pre-pass changes the graph
        source = {"kind": "onnx", "path": str(path), **training_layers(proto)}
        module, inputs, _ = load_module(path, proto)
        return cls(module, inputs, device=device, settings=step_settings(options), layers=layers, source=source)

    @classmethod
    def from_factory(cls, user: Any, spec: str, *, device: str, options: TrainOptions) -> "TorchTrainer":
        """The user's own ``nn.Module`` from ``factory.load_factory``: trained as it is written (``device``: the
        resolved one, not ``options.device``'s "auto")."""
        source = {"kind": "module", "factory": spec, **user.to_json()}
        return cls(user.module, user.inputs, device=device, source=source,
                   settings=step_settings(options, loss_fn=user.loss_fn, optimizer_fn=user.optimizer_fn))

    def make_runner(self, arm: TrainArm) -> TorchTrainStep:
        check_arm(arm, self.device)
        return TorchTrainStep(self.module, arm, self.inputs, device=self.device, settings=self.settings)

    def tune(self, arm: TrainArm, feeds: Mapping[str, np.ndarray]) -> None:
        """GPU with autotuning: two steps of a throwaway copy, so cuDNN has timed its algorithms for
        this arm and shape before anything is counted (its trial workspaces are not the step's
        memory, and tuning is never inside a timed step)."""
        if self.device != "cuda" or not self.autotune:
            return
        runner = self.make_runner(arm)
        try:
            for _ in range(TUNE_STEPS):
                runner.infer(feeds)
        finally:
            runner.close()
            del runner
            mem.release()

    def solo(self, arm: TrainArm, runner: TorchTrainStep, feeds: Mapping[str, np.ndarray], steps: int,
             reasons: bool) -> ArmRun:
        """``steps`` steps from the initial weights on the same data: loss curve, skipped steps (a
        GradScaler step whose scale went down found inf/NaN gradients and did not update), peak
        memory (GPU); then the profile passes for the reasons."""
        on_gpu = self.device == "cuda"
        self.tune(arm, feeds)
        before = mem.start_peak() if on_gpu else 0.0
        losses: list[float] = []
        skipped = 0 if runner.scaler is not None else None
        for _ in range(steps):
            scale = runner.scaler.get_scale() if runner.scaler is not None else None
            losses.append(float(runner.infer(feeds)["loss"][0]))
            if runner.scaler is not None and scale is not None and runner.scaler.get_scale() < scale:
                skipped = (skipped or 0) + 1
        memory = mem.read_peak(before).to_json() if on_gpu else None
        if memory is not None:
            memory.update(mem.breakdown(runner, runner.tensors_for(feeds), memory))
        # the graphed arm's reasons would describe its eager step: its evidence is its own timing
        profile = rs.profile_arm(runner, runner.tensors_for(feeds)) if reasons and not arm.graphed else None
        return ArmRun(losses=losses, skipped_steps=skipped, memory=memory, profile=profile)

    def findings(self, base: ArmRun, cand: ArmRun, *, peer: tuple[ArmRun, float] | None, steps: int,
                 timed_ms: float | None = None) -> list[Any]:
        if base.profile is None or cand.profile is None:
            return []
        run = rs.RunFacts(steps_run=steps, skipped_steps=cand.skipped_steps, timed_ms=timed_ms,
                          memory={"baseline": base.memory, "candidate": cand.memory}, device=self.device,
                          autotune=self.autotune)
        peer_profile = peer[0].profile if peer else None
        return rs.findings_for(base.profile, cand.profile, run, layers=self.layers,
                               peer=(peer_profile, peer[1]) if peer and peer_profile is not None else None)

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
                if is_out_of_memory(err):
                    return False
                raise
            finally:
                if runner is not None:
                    runner.close()
                del runner
                mem.release()

        return find_max_batch(fits, start=start, limit=limit, resolution=resolution).to_json()

    def environment(self) -> dict[str, Any]:
        torch = import_torch()
        env: dict[str, Any] = {"framework": self.framework, "torch": torch.__version__, "device": self.device,
                               # what every arm's step ran with (the global flag is restored after each)
                               "cudnn_benchmark": bool(self.autotune) if self.device == "cuda" else None,
                               "tensor_core_layers": self.layers[:50], "source": self.source}
        if self.source.get("kind") == "onnx":
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
