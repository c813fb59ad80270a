"""The validity stamp: ``VALID``, or ``NOT VALID: <reasons>``, on every compare, bench, serving and
train-compare result, each reason with what to do about it.

Why a stamp: a speedup with a tight interval can still be a measurement of the wrong thing (a CPU
"fp16" that ran FP32 behind casts), of a machine that was busy (another process on the GPU, a load
average above the cores) or of a run that did not get what the method needs (fewer loads than the
minimum, a budget blown through). MLPerf LoadGen stamps every result VALID/INVALID; pyperf's system
checks say what to change. Each check here is a plain function of recorded facts (the GPU watch's
summary from ``nvml.watch_gpu``, ``noise.cpu_state``, counts and seconds), so a result file can be
judged again later and every threshold is tested just inside and just outside it.

The checks judge only what was seen: no NVML, no cpufreq, no load average → no reason from them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .nvml import THERMAL_REASONS

# A budget is a promise "within 10 %" (interleave.BUDGET_PLAN_SHARE plans against 95 % of it): a run
# that took more than this much over its budget did not keep it.
BUDGET_OVERRUN_LIMIT = 0.10
# The SM clock's range while measuring, over its highest value, above which clocks were not steady:
# a 5 % clock step is a 5 % latency step, five times the ±1 % equivalence margin (same figure as
# timing.CLOCK_MOVED_FRACTION, which compares only the loop's first and last reads).
CLOCK_RANGE_LIMIT = 0.05
# Share of the GPU watch's samples with a non-benign throttle reason above which the run was
# throttled: one sample in twenty (a 0.1 s brush with the power cap) is noise, more is a trend.
THROTTLED_SHARE_LIMIT = 0.05
# Degrees below the GPU's slowdown temperature at which it is "at its temperature limit": the driver
# starts to pull clocks before the threshold itself (NVML_TEMPERATURE_THRESHOLD_SLOWDOWN).
TEMPERATURE_MARGIN_C = 5
# One-minute load average, as a multiple of the usable cores, at or above which the host was busy:
# every core has a runnable task besides ours, so a host-timed call waits for the scheduler.
LOAD_PER_CORE_LIMIT = 1.0
# The CPU frequency governor that keeps the clock steady (others ramp with load, mid-measurement).
STEADY_GOVERNOR = "performance"
# Serving rounds below which no interval over rounds exists (2 rounds: 1 degree of freedom, a t
# interval of 12.7 standard errors: [0.000, inf] on a real run).
MIN_SERVING_ROUNDS = 3
# What the backends record as effective precision when an fp16 engine computed in FP32 behind casts.
FP32_BEHIND_CASTS = "fp32+casts"
# The ops that hold a network's arithmetic (convolutions, GEMMs, matrix products) and the pooling beside
# them: an engine whose census (the backend's ``node_precision``: per op type, nodes per precision in the
# graph it executes) has more than this share of these nodes in FP32 is not a measurement of the precision
# it asked for, whatever else ran in it (an ORT CPU "fp16" of a CNN with a Concat: the Concat in FP16, every
# Conv, Gemm and pool FP32 behind casts, ``effective mixed``; issue 44). At most half in FP32 (a keep-list
# holding a few layers back) still measures it.
HEAVY_FP32_SHARE_LIMIT = 0.5
# Op types counted as heavy (any op type containing one of these, case-insensitive: Conv, ConvTranspose,
# QLinearConv, Gemm, QGemm, MatMul, MatMulInteger, MaxPool, GlobalAveragePool, QLinearAveragePool, …).
HEAVY_OP_WORDS = ("conv", "gemm", "matmul", "pool")
# The census bucket of the computed precision each asked precision is judged by (``node_precision``).
CLAIMED_BUCKET = {"fp16": "fp16", "int8": "int8"}

VALID = "VALID"
NOT_VALID = "NOT VALID"


@dataclass(frozen=True)
class Reason:
    """Why a result is not valid: a stable ``code`` (for scripts), the ``text`` a person reads, and
    ``advice``: what to do to get a valid one."""

    code: str
    text: str
    advice: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "text": self.text, "advice": self.advice}


@dataclass(frozen=True)
class Validity:
    reasons: tuple[Reason, ...] = ()
    checked: tuple[str, ...] = ()  # which checks had facts to judge (the others saw nothing)

    @property
    def valid(self) -> bool:
        return not self.reasons

    @property
    def stamp(self) -> str:
        """The one line: ``VALID`` or ``NOT VALID: reason; reason``."""
        return VALID if self.valid else f"{NOT_VALID}: " + "; ".join(r.text for r in self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "stamp": self.stamp, "reasons": [r.to_json() for r in self.reasons],
                "checked": list(self.checked)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Validity | None":
        if not data:
            return None
        return cls(tuple(Reason(r["code"], r["text"], r["advice"]) for r in data.get("reasons", [])),
                   tuple(data.get("checked", [])))


@dataclass(frozen=True)
class Facts:
    """What a result knows about how it was measured. ``None`` everywhere means "not known here"."""

    loads: int | None = None
    min_loads: int | None = None
    rounds: int | None = None  # serving rounds
    budget_s: float | None = None
    spent_s: float | None = None
    gpu: Mapping[str, Any] | None = None  # nvml.watch_gpu / merge_watches summary
    cpu: Mapping[str, Any] | None = None  # noise.cpu_state, read before measuring
    host_timed: bool = False  # a CPU result: the host's load and governor are the measurement's
    casts: Sequence[str] = field(default_factory=tuple)  # labels of arms that asked fp16 and ran fp32+casts
    heavy_fp32: Sequence["HeavyCensus"] = field(default_factory=tuple)  # arms whose census puts the heavy ops in FP32


def is_heavy(op_type: str) -> bool:
    low = op_type.lower()
    return any(word in low for word in HEAVY_OP_WORDS)


@dataclass(frozen=True)
class HeavyCensus:
    """One arm's heavy ops by its census: which ran in the asked precision and which in FP32."""

    label: str
    asked: str
    effective: str
    claimed: Mapping[str, int]  # heavy op type → nodes in the asked precision
    fp32: Mapping[str, int]  # heavy op type → nodes in FP32

    @property
    def share_fp32(self) -> float:
        n32, n = sum(self.fp32.values()), sum(self.fp32.values()) + sum(self.claimed.values())
        return n32 / n if n else 0.0

    @classmethod
    def of(cls, label: str, asked: str, effective: str, census: Mapping[str, Any] | None,
           kept: Mapping[str, Any] | None = None) -> "HeavyCensus | None":
        """The heavy part of ``census`` for an arm that asked ``asked`` (fp16, int8); None without a census,
        for another precision, or where the census counts no heavy op. ``kept``: per op type, the nodes the
        engine's keep-list asked to stay FP32 (``backend_metadata.kept_fp32``): FP32 by request, not counted."""
        bucket = CLAIMED_BUCKET.get(asked)
        if bucket is None or not isinstance(census, Mapping):
            return None

        def heavy(name: str) -> dict[str, int]:
            counts = census.get(name)
            return {str(op): int(n) for op, n in (counts.items() if isinstance(counts, Mapping) else ())
                    if is_heavy(str(op)) and isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0}

        fp32 = unasked_fp32(heavy("fp32"), kept)
        found = cls(label, asked, effective, heavy(bucket), fp32)
        return found if found.claimed or found.fp32 else None


def unasked_fp32(fp32: Mapping[str, int], kept: Mapping[str, Any] | None) -> dict[str, int]:
    """Per op type, the FP32 nodes of a census that a keep-list (``kept``: per op type of the source graph) did not
    ask for. ORT's executed graph may name a kept node by its fusion (``FusedConv`` for a Conv with its
    activation): a ``Fused`` op counts against its source op's keep."""
    left = {str(op): int(n) for op, n in (kept or {}).items() if isinstance(n, int) and not isinstance(n, bool)}
    out: dict[str, int] = {}
    for op, n in fp32.items():
        base = op.removeprefix("Fused")
        covered = min(n, left.get(base, 0))
        left[base] = left.get(base, 0) - covered
        if n > covered:
            out[op] = n - covered
    return out


def check_loads(loads: int | None, min_loads: int | None) -> Reason | None:
    if loads is None or min_loads is None or loads >= min_loads:
        return None
    return Reason("too_few_loads", f"{loads} of the minimum {min_loads} loads ran",
                  "give it time: a larger --time-budget-s, fewer batch sizes, or a model that loads faster")


def check_budget(budget_s: float | None, spent_s: float | None) -> Reason | None:
    if budget_s is None or spent_s is None or not budget_s > 0 or spent_s <= budget_s * (1 + BUDGET_OVERRUN_LIMIT):
        return None
    over = spent_s / budget_s - 1
    return Reason("budget_overrun", f"took {spent_s:.1f} s of a {budget_s:g} s budget "
                  f"({over:.0%} over; more than {BUDGET_OVERRUN_LIMIT:.0%} is a budget not kept)",
                  "raise --time-budget-s to what the minimum needs, or measure fewer batch sizes per run")


LOCK_CLOCKS = "lock clocks: nvidia-smi -lgc <max SM MHz> (nvidia-smi -rgc undoes it)"


def check_clocks(gpu: Mapping[str, Any] | None) -> Reason | None:
    clocks = (gpu or {}).get("sm_clock_mhz")
    if not clocks or not clocks.get("max"):
        return None
    low, high = clocks["min"], clocks["max"]
    if (high - low) <= CLOCK_RANGE_LIMIT * high:
        return None
    return Reason("clocks_unsteady", f"the SM clock ranged {low}-{high} MHz while measuring "
                  f"(more than {CLOCK_RANGE_LIMIT:.0%})", LOCK_CLOCKS)


def check_throttle(gpu: Mapping[str, Any] | None) -> Reason | None:
    gpu = gpu or {}
    n = gpu.get("samples") or 0
    counts = {k: v for k, v in (gpu.get("throttle_samples") or {}).items() if k not in THERMAL_REASONS}
    if not n or not counts:
        return None
    worst = max(counts.values())
    if worst <= THROTTLED_SHARE_LIMIT * n:
        return None
    names = ", ".join(f"{k} in {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    return Reason("gpu_throttled", f"GPU clocks were throttled while measuring ({names} of {n} samples)",
                  "a power cap (sw_power_cap): " + LOCK_CLOCKS + " below the cap, or check the power limit "
                  "(nvidia-smi -q -d PERFORMANCE,POWER); a slowdown (hw_slowdown): check power and cooling")


def check_temperature(gpu: Mapping[str, Any] | None) -> Reason | None:
    gpu = gpu or {}
    thermal = {k: v for k, v in (gpu.get("throttle_samples") or {}).items() if k in THERMAL_REASONS}
    hottest, limit = gpu.get("temperature_c_max"), gpu.get("slowdown_temp_c")
    near = hottest is not None and limit is not None and hottest >= limit - TEMPERATURE_MARGIN_C
    if not thermal and not near:
        return None
    what = (f"the GPU reached {hottest} °C, within {TEMPERATURE_MARGIN_C} °C of its slowdown temperature {limit} °C"
            if near else "the GPU slowed down for its temperature")
    if thermal:
        what += " (" + ", ".join(f"{k} in {v} samples" for k, v in sorted(thermal.items())) + ")"
    return Reason("gpu_temperature", what, "let it cool between runs, check the fans and airflow, or lock "
                  "lower clocks (nvidia-smi -lgc) so it stays below the limit")


def check_processes(gpu: Mapping[str, Any] | None) -> Reason | None:
    others = (gpu or {}).get("other_pids")
    if not others:
        return None
    named = [str(p) for p in others if p > 0]
    which = f"pid {', '.join(named[:5])}" if named else "pids of another namespace: a count beyond trtprof's own"
    return Reason("gpu_other_process", f"{len(others)} other process(es) used the GPU while measuring ({which})",
                  "stop them (nvidia-smi lists them) or measure on another GPU (CUDA_VISIBLE_DEVICES)")


def check_cpu_load(cpu: Mapping[str, Any] | None) -> Reason | None:
    cpu = cpu or {}
    load, cores = (cpu.get("load_average") or [None])[0], cpu.get("usable_cores")
    if load is None or not cores or load < LOAD_PER_CORE_LIMIT * cores:
        return None
    return Reason("cpu_busy", f"the host was busy: load average {load:g} on {cores} usable cores",
                  "run on a quiet machine (stop other jobs; `uptime` shows the load) or give trtprof its "
                  "own cores (taskset)")


def check_governor(cpu: Mapping[str, Any] | None) -> Reason | None:
    governor = (cpu or {}).get("governor")
    if governor is None or governor == STEADY_GOVERNOR:
        return None
    return Reason("cpu_governor", f"the CPU governor is {governor!r}, not {STEADY_GOVERNOR!r}",
                  f"sudo cpupower frequency-set -g {STEADY_GOVERNOR} (the clock then stays put while measuring)")


def check_casts(casts: Sequence[str]) -> Reason | None:
    if not casts:
        return None
    return Reason("fp16_is_fp32", f"{', '.join(casts)} ran FP32 kernels behind casts (asked for fp16): "
                  "not a measurement of FP16",
                  "FP16 arithmetic needs a GPU backend (tensorrt, or torch on CUDA); on this CPU compare fp32 "
                  "with int8 (--precisions fp32,int8: ONNX Runtime's CPU provider has integer Conv/MatMul/Gemm "
                  "kernels; it has no BF16 ones, so trtprof refuses bf16 there)")


def check_heavy_fp32(heavy: Sequence[HeavyCensus]) -> Reason | None:
    """NOT VALID as a measurement of the asked precision: more than ``HEAVY_FP32_SHARE_LIMIT`` of an arm's
    heavy nodes ran FP32 by its census (an arm already judged by ``check_casts`` is not passed here)."""
    bad = [h for h in heavy if h.share_fp32 > HEAVY_FP32_SHARE_LIMIT]
    if not bad:
        return None

    def ops(counts: Mapping[str, int]) -> str:
        return ", ".join(f"{op}×{n}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    parts = []
    for h in bad:
        n32, n = sum(h.fp32.values()), sum(h.fp32.values()) + sum(h.claimed.values())
        parts.append(f"{h.label} (effective {h.effective}) ran {n32} of its {n} heavy nodes in FP32 by its census "
                     f"(node_precision: {ops(h.fp32)} FP32" + (f"; {ops(h.claimed)} {h.asked}" if h.claimed else "")
                     + f"): not a measurement of {h.asked.upper()}")
    asked = sorted({h.asked for h in bad})
    advice = ("measure it where its heavy ops have kernels of that precision: FP16 on a GPU backend (tensorrt, "
              "torch on CUDA, onnxruntime-gpu)" if asked == ["fp16"] else
              "measure it where its heavy ops have kernels of that precision (FP16: a GPU backend; INT8: a "
              "provider with integer kernels for them)")
    return Reason("heavy_ops_fp32", "; ".join(parts), advice + "; `trtprof inspect ENGINE` lists what ran in which "
                  "precision")


def check_serving_rounds(rounds: int | None) -> Reason | None:
    if rounds is None or rounds >= MIN_SERVING_ROUNDS:
        return None
    return Reason("too_few_rounds", f"{rounds} serving round(s): an interval over rounds needs at least "
                  f"{MIN_SERVING_ROUNDS}", f"--serving-rounds {MIN_SERVING_ROUNDS} or more")


def assess(facts: Facts) -> Validity:
    """Every check that has facts to judge; the reasons in a fixed order (method, GPU, host, precision)."""
    gpu = facts.gpu if facts.gpu else None
    host = facts.cpu if facts.host_timed else None
    checks = [
        ("loads", facts.loads is not None and facts.min_loads is not None, check_loads(facts.loads, facts.min_loads)),
        ("serving_rounds", facts.rounds is not None, check_serving_rounds(facts.rounds)),
        ("budget", facts.budget_s is not None and facts.spent_s is not None, check_budget(facts.budget_s, facts.spent_s)),
        ("clocks", bool(gpu and gpu.get("sm_clock_mhz")), check_clocks(gpu)),
        ("throttle", bool(gpu and gpu.get("samples")), check_throttle(gpu)),
        ("temperature", bool(gpu and gpu.get("temperature_c_max") is not None), check_temperature(gpu)),
        ("gpu_processes", bool(gpu and gpu.get("other_pids") is not None), check_processes(gpu)),
        ("cpu_load", bool(host and host.get("load_average")), check_cpu_load(host)),
        ("cpu_governor", bool(host and host.get("governor")), check_governor(host)),
        ("precision", True, check_casts(facts.casts)),
        ("heavy_ops", bool(facts.heavy_fp32), check_heavy_fp32(
            [h for h in facts.heavy_fp32 if h.label not in set(facts.casts)])),
    ]
    return Validity(tuple(r for _, _, r in checks if r is not None), tuple(name for name, seen, _ in checks if seen))


def merge(validities: Sequence[Validity | None]) -> Validity:
    """Several results as one stamp (a page's top, a whole run): every distinct reason once."""
    reasons: dict[tuple[str, str], Reason] = {}
    checked: dict[str, None] = {}
    for v in validities:
        if v is None:
            continue
        for r in v.reasons:
            reasons.setdefault((r.code, r.text), r)
        checked.update(dict.fromkeys(v.checked))
    return Validity(tuple(reasons.values()), tuple(checked))


def stamp_lines(validity: Mapping[str, Any] | Validity | None) -> list[str]:
    """The stamp and, under it, what to do for each reason: what the CLI prints first for a result."""
    v = validity if isinstance(validity, Validity) or validity is None else Validity.from_json(validity)
    if v is None:
        return []
    lines = [v.stamp]
    lines.extend(f"  to fix [{r.code}]: {r.advice}" for r in v.reasons)
    return lines
