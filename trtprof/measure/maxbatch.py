"""The largest batch that fits: one search, shared by ``train-compare --find-max-batch`` (a training
step per arm) and ``bench --find-max-batch`` (one inference per engine).

The search (``find_max_batch``) is pure: it doubles from batch 1 until a batch does not fit, then
bisects between the largest fit and the smallest failure. What "fits" means is the caller's:

* **GPU engines** (torch, TensorRT): a real attempt. The engine runs one inference at the batch; a
  CUDA out-of-memory error (``torch.cuda.OutOfMemoryError``, cudaErrorMemoryAllocation, cuDNN/cuBLAS
  ALLOC_FAILED) means it does not, and the allocator's cache is emptied before the next try. A
  TensorRT engine cannot run past its optimization profile's max batch: the search stops there and
  says so (a rebuild with larger ``--batch-sizes`` searches further).
* **ONNX Runtime on the CPU**: a BUDGET, not an allocation failure. Growing until the host fails
  would exhaust the machine (swap, the OOM killer), so each batch runs in a fresh child process
  whose peak resident memory (``VmHWM`` from just before the engine loads to after two inferences)
  is compared with ``--memory-limit-mb`` (default: half the memory available now). A watchdog in
  the child stops it as soon as its resident memory passes the budget, so a probe never takes much
  more than the budget. A fresh process per batch because an arena, glibc's heap and a previous
  batch's pages would otherwise hide what this batch needs.
"""
from __future__ import annotations

import gc
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import backends
from ..backends.base import MEMORY_REPORT_WORDS
from ..system import memory, preflight
from ..errors import BadInput, TrtprofError, first_line
from ..model.inputs import DEFAULT_INT_RANGE, make_inputs, resolve_shapes
from .workers import prepend_package_root

# --memory-limit-mb: checked here, when the search's settings are made (before any run), not by its
# argparse type, so that its messages stay those of a budget ("must be a number > 0")
MAX_MEMORY_LIMIT_MB = 1 << 30  # 1 PiB: more than any machine's memory
MAX_BATCH_LIMIT = 4096  # --find-max-batch stops searching here (a fit at this size is reported as "≥")
DEFAULT_BUDGET_FRACTION = 0.5  # CPU engines without --memory-limit-mb: this share of MemAvailable
SEARCH_RESOLUTION = 0.1  # bisection stops once the gap between fit and failure is within this share of the fit
PROBE_RUNS = 2  # inferences per probe: ORT's memory pattern allocates its block from the second run on
WATCH_INTERVAL_S = 0.002  # the child's watchdog reads its resident set this often
BUDGET_METHOD = ("peak resident set (VmHWM, reset just before the engine loads) of a fresh process that loads the "
                 "engine, makes the batch's inputs and runs it twice, minus its resident set before loading; a "
                 "watchdog stops the process once it passes the budget")


@dataclass(frozen=True)
class MaxBatch:
    largest_fit: int
    smallest_fail: int | None  # None: nothing up to the limit failed
    limit: int
    probes: list[tuple[int, bool]]
    resolution: float = SEARCH_RESOLUTION  # the bisection's stop: the answer is exact only when the gap is 1

    def to_json(self) -> dict[str, Any]:
        return {"largest_fit": self.largest_fit, "smallest_fail": self.smallest_fail, "limit": self.limit,
                "resolution": self.resolution,
                "at_limit": self.smallest_fail is None,
                "probes": [{"batch_size": b, "fits": ok} for b, ok in self.probes]}


def find_max_batch(fits: Callable[[int], bool], start: int = 1, limit: int = MAX_BATCH_LIMIT,
                   resolution: float = SEARCH_RESOLUTION) -> MaxBatch:
    """Double from ``start`` until a batch fails (or ``limit``), then bisect until the gap between the
    largest fit and the smallest failure is within ``resolution`` of the fit. Pure search: ``fits``
    does the probing (and must free its memory before returning)."""
    probes: list[tuple[int, bool]] = []

    def probe(b: int) -> bool:
        ok = fits(b)
        probes.append((b, ok))
        return ok

    lo, hi = 0, None
    b = max(1, start)
    while b <= limit:
        if probe(b):
            lo = b
            if b == limit:
                break
            b = min(limit, b * 2)
        else:
            hi = b
            break
    if hi is not None:
        while hi - lo > max(1, int(resolution * max(lo, 1))):
            mid = (lo + hi) // 2
            if mid in (lo, hi):
                break
            if probe(mid):
                lo = mid
            else:
                hi = mid
    return MaxBatch(largest_fit=lo, smallest_fail=hi, limit=limit, probes=probes, resolution=resolution)


@dataclass(frozen=True)
class SearchSettings:
    """What every probe of ``bench --find-max-batch`` runs with (the bench's own input settings)."""

    max_batch_limit: int = MAX_BATCH_LIMIT
    budget_bytes: int | None = None  # CPU engines: the memory budget
    budget_source: str = ""
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    seed: int = 0
    int_range: tuple[int, int] = DEFAULT_INT_RANGE
    threads: int | None = None
    autotune: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"max_batch_limit": self.max_batch_limit, "budget_bytes": self.budget_bytes,
                "budget_source": self.budget_source, "threads": self.threads, "autotune": self.autotune,
                "inputs": "random inputs", "seed": self.seed}


def default_budget(limit_mb: float | None) -> tuple[int, str]:
    """The CPU budget in bytes and where it came from: ``--memory-limit-mb``, else half of MemAvailable."""
    if limit_mb is not None:
        if not math.isfinite(limit_mb) or limit_mb <= 0:
            raise BadInput(f"--memory-limit-mb {limit_mb:g}: must be a number > 0")
        if limit_mb > MAX_MEMORY_LIMIT_MB:
            raise BadInput(f"--memory-limit-mb {limit_mb:g}: at most {MAX_MEMORY_LIMIT_MB:,} (1 PiB)")
        return int(limit_mb * (1 << 20)), f"--memory-limit-mb {limit_mb:g}"
    available = preflight.available_memory_bytes()
    if available is None:
        raise BadInput("--find-max-batch on an onnxruntime engine needs --memory-limit-mb "
                       "(no /proc/meminfo here to size a default budget)")
    budget = int(available * DEFAULT_BUDGET_FRACTION)
    return budget, (f"{DEFAULT_BUDGET_FRACTION:.0%} of the memory available at the start "
                    f"({memory.fmt_size(available)} MemAvailable in /proc/meminfo)")


def static_batch(inputs: Any) -> int | None:
    """The batch a model fixes (nothing to search): only when EVERY input with dims fixes its first dim,
    all to the same size. One dynamic first dim (``x:[N,3,8,8]`` next to ``scale:[1]``) makes the
    batch searchable; the search then says which input stops it, rather than "static batch 1"."""
    firsts = [t.shape[0] for t in inputs if t.shape]
    if not firsts or not all(isinstance(d, int) for d in firsts):
        return None
    fixed = {int(d) for d in firsts}
    return fixed.pop() if len(fixed) == 1 else None


def label_of(record: Any) -> str:
    return f"{record.model} {record.precision} ({record.backend})"


# -- GPU engines: a real allocation attempt per batch -----------------------------------------------
def device_memory() -> tuple[int, int]:
    """(bytes in use on the device, total bytes): cudaMemGetInfo, the whole device (other processes too)."""
    from ..system import cuda

    free, total = cuda.memory_info()
    return total - free, total


def release_device(runner: Any) -> None:
    """Drop what a probe left: unreferenced tensors, then the allocator's cached blocks (torch)."""
    gc.collect()
    trim = getattr(runner, "trim", None)
    if trim is not None:
        trim()


def device_probe(runner: Any, record: Any, batch: int, settings: SearchSettings) -> dict[str, Any]:
    """One inference at ``batch``: fits, with the memory in use, or did not fit, with the error's line."""
    overrides = {**record.spec.shape_overrides(), **settings.shapes}
    shapes = resolve_shapes(runner.inputs, batch, overrides, model_path=record.model_path)
    failure, detail = None, {}
    try:
        feeds = make_inputs(runner.inputs, shapes, seed=settings.seed, int_range=settings.int_range)
        memory.reset_peak(runner)
        outputs = runner.infer(feeds)
        report = memory.inference_memory(runner, rss_before_load=None, rss_after_load=None, rss_before_run=None,
                                         rss_after_run=None)
        used, total = device_memory()
        detail = {"memory": report, "device_used_bytes": used, "device_total_bytes": total}
        if backends.capabilities(record.backend).tensorrt_plan:  # the context's activations + this batch's IO buffers
            io = sum(int(v.nbytes) for v in feeds.values()) + sum(int(v.nbytes) for v in outputs.values())
            detail["io_bytes"] = io
            detail["in_use_bytes"] = (memory.in_use_bytes(report) or 0) + io
        else:
            detail["in_use_bytes"] = memory.in_use_bytes(report)
        del feeds, outputs
    except Exception as err:  # noqa: BLE001 - only an allocation failure means "does not fit"
        if not preflight.is_out_of_memory(err):
            raise
        failure = first_line(err, limit=200)
    release_device(runner)
    return {"batch_size": batch, "fits": failure is None, **detail, **({"failure": failure} if failure else {})}


def search_device(record: Any, settings: SearchSettings) -> dict[str, Any]:
    from ..backends.base import set_autotune
    from .bench import load_runner

    runner = load_runner(record)
    set_autotune(runner, settings.autotune)
    details: dict[int, dict[str, Any]] = {}
    try:
        fixed = static_batch(runner.inputs)
        if fixed is not None:
            return static_entry(record, fixed)
        limit, limited_by = settings.max_batch_limit, "max_batch_limit"
        if backends.capabilities(record.backend).tensorrt_plan and record.spec.max_batch < limit:
            limit, limited_by = record.spec.max_batch, "engine_profile"

        def fits(batch: int) -> bool:
            details[batch] = device_probe(runner, record, batch, settings)
            return bool(details[batch]["fits"])

        found = find_max_batch(fits, limit=limit)
    finally:
        runner.close()
        release_device(runner)
    return entry(record, found, details, limited_by, "out_of_memory", settings)


# -- ONNX Runtime on the CPU: a budget, measured in a fresh process per batch ------------------------
def host_probe(record: Any, batch: int, settings: SearchSettings) -> dict[str, Any]:
    """Run ``probe_main`` in a child process for one batch; its JSON answer (or why it has none)."""
    request = {"meta": str(record.meta_path), "batch": batch, "budget": settings.budget_bytes,
               "shapes": {k: list(v) for k, v in settings.shapes.items()}, "seed": settings.seed,
               "int_range": list(settings.int_range), "threads": settings.threads}
    env = dict(os.environ)
    prepend_package_root(env)  # the child runs this trtprof, like the compare workers
    proc = subprocess.run([sys.executable, "-c", "from trtprof.measure.maxbatch import probe_main; probe_main()"],
                          input=json.dumps(request), capture_output=True, text=True, encoding="utf-8",
                          errors="replace", env=env)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == -signal.SIGKILL:  # the kernel's OOM killer (the watchdog itself exits 0 with an answer)
        return {"batch_size": batch, "fits": False,
                "failure": "the probe process was killed by SIGKILL (the out-of-memory killer)"}
    if proc.returncode < 0:  # a crash (SIGSEGV, SIGABRT...) is not a memory limit: say so, do not count it
        last = (proc.stderr or "").strip().splitlines()[-1:]
        raise TrtprofError(f"the --find-max-batch probe of {label_of(record)} at batch {batch} died of signal "
                           f"{-proc.returncode} (return code {proc.returncode}), not a memory limit"
                           + (f": {last[0][:200]}" if last else ""))
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError) as err:
        tail = " ".join(proc.stderr.strip().splitlines()[-2:])[:300]
        raise TrtprofError(f"the --find-max-batch probe of {label_of(record)} at batch {batch} gave no answer "
                           f"(exit {proc.returncode}): {tail or 'no output'}") from err
    if "error" in answer:
        raise (BadInput if answer.get("bad_input") else TrtprofError)(answer["error"])
    return {"batch_size": batch, **answer}


def search_host(record: Any, settings: SearchSettings) -> dict[str, Any]:
    details = {1: host_probe(record, 1, settings)}
    if details[1].get("static_batch"):
        return static_entry(record, int(details[1]["static_batch"]))
    if not details[1]["fits"]:
        raise BadInput(f"{settings.budget_source}: batch 1 of {label_of(record)} needs "
                       f"{needs(details[1])}, over the budget of {memory.fmt_size(settings.budget_bytes)}: "
                       "nothing fits; give a larger --memory-limit-mb")

    def fits(batch: int) -> bool:
        if batch not in details:
            details[batch] = host_probe(record, batch, settings)
        return bool(details[batch]["fits"])

    found = find_max_batch(fits, limit=settings.max_batch_limit)
    return entry(record, found, details, "max_batch_limit", "memory_budget", settings)


def needs(detail: Mapping[str, Any]) -> str:
    """What a host probe measured, in words ("> 156 MiB (stopped)" when the watchdog ended it)."""
    if detail.get("peak_bytes") is not None:
        return memory.fmt_size(detail["peak_bytes"])
    if detail.get("over_budget_bytes") is not None:
        return f"> {memory.fmt_size(detail['over_budget_bytes'])} (stopped when it passed the budget)"
    return f"an allocation that failed ({detail.get('failure', 'no measurement')})"


def probe_main() -> None:
    """The child of ``host_probe``: one batch, one JSON line on stdout. Reads its request on stdin."""
    from ..backends.onnxruntime import import_ort

    request = json.loads(sys.stdin.read())
    budget = request["budget"]
    import_ort()  # its import (tens of MiB) is the process's, not the engine's: before the baseline
    base = memory.rss_bytes() or 0
    reset = memory.reset_peak_rss()
    lock = threading.Lock()

    def emit(answer: dict[str, Any]) -> None:
        with lock:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
            os._exit(0)

    def watch() -> None:
        while True:
            now = (memory.rss_bytes() or 0) - base
            if budget is not None and now > budget:
                emit({"fits": False, "over_budget_bytes": now})
            time.sleep(WATCH_INTERVAL_S)

    threading.Thread(target=watch, daemon=True).start()
    emit(probe_batch(request, base, reset))


def probe_batch(request: Mapping[str, Any], base: int, reset: bool) -> dict[str, Any]:
    from .bench import load_runner
    from ..engines.cache import EngineRecord

    try:
        record = EngineRecord.read(Path(request["meta"]))
        runner = load_runner(record, request["threads"])
        fixed = static_batch(runner.inputs)
        if fixed is not None:
            return {"static_batch": fixed}
        overrides = {**record.spec.shape_overrides(), **{k: tuple(v) for k, v in request["shapes"].items()}}
        shapes = resolve_shapes(runner.inputs, request["batch"], overrides, model_path=record.model_path)
        feeds = make_inputs(runner.inputs, shapes, seed=request["seed"], int_range=tuple(request["int_range"]))
        for _ in range(PROBE_RUNS):
            runner.infer(feeds)
    except TrtprofError as err:
        return {"error": str(err), "bad_input": isinstance(err, BadInput)}
    except Exception as err:  # noqa: BLE001 - an allocation failure is "does not fit"; the rest is reported
        if preflight.is_out_of_memory(err):
            return {"fits": False, "failure": first_line(err, limit=200)}
        return {"error": f"{type(err).__name__}: {first_line(err, limit=200)}"}
    peak = (memory.peak_rss_bytes() or 0) - base
    budget = request["budget"]
    return {"fits": budget is None or peak <= budget, "peak_bytes": peak, "hwm_reset": reset}


# -- the entries in the results JSON and their lines ------------------------------------------------
def static_entry(record: Any, batch: int) -> dict[str, Any]:
    return {"model": record.model, "precision": record.precision, "backend": record.backend,
            "artifact": str(record.artifact_path), "largest_fit": None, "static_batch": batch,
            "stopped_by": "static_batch"}


def entry(record: Any, found: MaxBatch, details: Mapping[int, Mapping[str, Any]], limited_by: str, failed_by: str,
          settings: SearchSettings) -> dict[str, Any]:
    """One engine's answer: the search (``MaxBatch.to_json``), what stopped it, and each probe's measurement."""
    data = found.to_json()
    data["probes"] = [dict(details.get(p["batch_size"], p)) for p in data["probes"]]
    data.update({"model": record.model, "precision": record.precision, "backend": record.backend,
                 "artifact": str(record.artifact_path),
                 "stopped_by": limited_by if found.smallest_fail is None else failed_by,
                 "at_largest_fit": dict(details.get(found.largest_fit, {})),
                 "at_smallest_fail": dict(details.get(found.smallest_fail, {})) if found.smallest_fail else None,
                 "settings": settings.to_json()})
    if failed_by == "memory_budget":
        data.update({"budget_bytes": settings.budget_bytes, "budget_source": settings.budget_source,
                     "method": BUDGET_METHOD + "; a budget, not an allocation failure"})
    else:
        data["method"] = ("one inference per batch (doubling, then bisection); does not fit = the allocation failed "
                          "(CUDA out of memory), the allocator's cache emptied between tries")
    return data


def search(records: Any, settings: SearchSettings) -> list[dict[str, Any]]:
    """``bench --find-max-batch``: one entry per engine (a budget search on the CPU, a real attempt on a GPU)."""
    return [search_host(r, settings) if backends.capabilities(r.backend).device == "cpu" else search_device(r, settings)
            for r in records]


def fit_memory(at: Mapping[str, Any]) -> str:
    """The memory in use at the largest fit, in words (which figure, of what)."""
    if at.get("peak_bytes") is not None:
        return f"peak RSS growth {memory.fmt_size(at['peak_bytes'])}"
    used = at.get("in_use_bytes")
    kind = (at.get("memory") or {}).get("kind")
    what = MEMORY_REPORT_WORDS.get(str(kind), "in use")
    text = f"{what} {memory.fmt_size(used)}" if used is not None else "memory n/a"
    if at.get("device_total_bytes"):
        text += (f"; device {memory.fmt_size(at['device_used_bytes'])} of "
                 f"{memory.fmt_size(at['device_total_bytes'])} in use")
    return text


def fit_line(found: Mapping[str, Any]) -> str:
    """One line per engine for bench's summary and the report: the answer, the memory at it and
    what stopped the search."""
    label = f"{found['precision']} ({found['backend']}, {found['model']})"
    stop = found.get("stopped_by")
    if stop == "static_batch":
        return f"{label}: static batch {found['static_batch']} in the model: nothing to search"
    budget = stop == "memory_budget" or found.get("budget_bytes") is not None
    head = (f"{label}: largest batch within the {memory.fmt_size(found['budget_bytes'])} memory budget"
            if budget else f"{label}: largest batch that fits")
    at = found.get("at_largest_fit") or {}
    if stop == "max_batch_limit":
        return f"{head}: ≥ {found['largest_fit']} ({fit_memory(at)}; the search stopped at --max-batch-limit " \
               f"{found['limit']}, nothing failed)"
    if stop == "engine_profile":
        return f"{head}: {found['largest_fit']} ({fit_memory(at)}; the engine's optimization profile ends at batch " \
               f"{found['limit']}: rebuild with larger --batch-sizes to search further)"
    fail = found.get("at_smallest_fail") or {}
    if not found["largest_fit"]:
        return f"{head}: none (batch 1 did not fit: {fail.get('failure', 'out of memory')})"
    gap = search_gap(found)
    if budget:
        return f"{head}: {found['largest_fit']} ({fit_memory(at)}; {gap}{found['smallest_fail']} needs {needs(fail)}) " \
               "— a budget, not an allocation failure"
    return f"{head}: {found['largest_fit']} ({fit_memory(at)}; {gap}{found['smallest_fail']} did not fit: " \
           f"{fail.get('failure', 'out of memory')})"


def search_gap(found: Mapping[str, Any]) -> str:
    """"" when the fit and the failure are adjacent (the answer is exact), else how close the bisection
    went ("searched to within 10 %: "): batches between the two were never tried."""
    if found["smallest_fail"] - found["largest_fit"] <= 1:
        return ""
    return f"searched to within {100 * found.get('resolution', SEARCH_RESOLUTION):.0f} %: "
