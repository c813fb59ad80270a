"""The concurrent driver (trtprof.serving.driver), the sweep, the SLO verdict and the CLI (issue 24).

Timing-free: the driver's window arithmetic is checked on a FAKE clock that only the requests move
(each request "takes" exactly 1 ms of fake time), so every expected number is exact."""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import pytest

from trtprof.serving import driver as serving
from trtprof.errors import BadInput
from trtprof.serving.driver import ServingConfig, Window, cpu_sessions, run_window

MS = 1_000_000
LOOK_WAIT_S = 0.2  # the longest a fake request waits for the driver to look at the clock


class FakeTime:
    """A shared fake clock: each request advances it by ``step_ns`` (a device that serializes work);
    ``sleep`` waits (really, briefly) until the requests have moved it on by that long."""

    def __init__(self, step_ns: int = MS) -> None:
        self.now = 0
        self.step = step_ns
        self.lock = threading.Lock()
        self.looked = threading.Event()  # set by ``sleep`` each time the sleeping driver read the clock

    def clock(self) -> int:
        return self.now

    def request(self) -> None:
        with self.lock:
            self.now += self.step
            self.looked.clear()
        # Lockstep with the driver: a request returns once the sleeping driver has seen the clock it moved
        # (or after LOOK_WAIT_S, where the driver is not sleeping). A fixed real-time pause (0.5 ms) still
        # let a worker run several requests while the driver thread was descheduled, and the cap test saw
        # 17 requests against its bound of 16 under load (scheduling, not the driver).
        self.looked.wait(LOOK_WAIT_S)

    def sleep(self, seconds: float) -> None:
        target = self.now + seconds * 1e9
        deadline = time.monotonic() + 30  # a safety stop for a broken driver, not an expectation
        while time.monotonic() < deadline:
            now = self.now
            self.looked.set()
            if now >= target:
                break
            time.sleep(0.0002)


def _sessions(fake: FakeTime, n: int):
    return [lambda: nullcontext(fake.request) for _ in range(n)]


def test_one_in_flight_on_the_fake_clock_is_exact():
    fake = FakeTime()
    w = run_window(_sessions(fake, 1), ServingConfig(warmup_s=0.005, window_s=0.05, min_requests=1),
                   clock=fake.clock, sleep=fake.sleep)
    assert np.all(w.latencies_ms == 1.0)  # each request moved the clock by exactly 1 ms
    assert abs(w.requests - w.wall_s * 1e3) <= 1  # 1 ms each: requests = window length in ms (± an edge)
    assert w.requests == sum(w.per_worker) and not w.stretched


def test_a_serializing_device_gives_the_same_throughput_and_longer_latency_at_four_in_flight():
    fake = FakeTime()
    w = run_window(_sessions(fake, 4), ServingConfig(warmup_s=0.01, window_s=0.2, min_requests=1),
                   clock=fake.clock, sleep=fake.sleep)
    assert abs(w.requests - w.wall_s * 1e3) <= 4  # still one request per fake ms, whatever N
    assert len(w.per_worker) == 4 and sum(w.per_worker) == w.requests
    assert w.latencies_ms.min() >= 1.0  # a request's latency includes the others' requests in between


def test_the_window_stretches_to_min_requests_and_stops_at_the_cap():
    fake = FakeTime()
    w = run_window(_sessions(fake, 1), ServingConfig(warmup_s=0.0, window_s=0.005, min_requests=30),
                   clock=fake.clock, sleep=fake.sleep)
    assert w.stretched and w.requests >= 30
    cap = run_window(_sessions(fake, 1), ServingConfig(warmup_s=0.0, window_s=0.001, min_requests=10_000),
                     clock=fake.clock, sleep=fake.sleep)
    limit_ms = serving.MAX_WINDOW_FACTOR * 1.0
    assert cap.stretched and limit_ms <= cap.requests <= limit_ms + serving.POLL_S * 1e3 + 1


def test_a_failing_request_stops_every_worker_and_is_raised():
    calls = {"n": 0}

    def request():
        calls["n"] += 1
        if calls["n"] == 5:
            raise RuntimeError("engine failed")

    with pytest.raises(RuntimeError, match="engine failed"):
        run_window([lambda: nullcontext(request)] * 3, ServingConfig(warmup_s=0.01, window_s=0.05))
    assert threading.active_count() < 10  # every worker joined


def test_a_failing_session_setup_is_raised_without_hanging():
    @contextmanager
    def broken():
        raise BadInput("no such engine")
        yield  # pragma: no cover

    with pytest.raises(BadInput, match="no such engine"):
        run_window([lambda: nullcontext(lambda: None), broken], ServingConfig(warmup_s=0.0, window_s=0.01))


class FakeThreadLocalPlanCache:
    """A FAKE of PyTorch's cuDNN plan cache, which is ``thread_local`` (ATen cudnn/Conv_v8.cpp): the first
    request of a shape on a thread "autotunes" (100 fake ms on the fake clock), later ones take 1 ms."""

    def __init__(self, fake: FakeTime) -> None:
        self.fake = fake
        self.local = threading.local()
        self.tuned: list[tuple[int, str]] = []  # (thread, shape) per autotuning

    def session(self, shape: str):
        def request() -> None:
            seen = self.local.__dict__.setdefault("shapes", set())
            if shape not in seen:
                seen.add(shape)
                self.tuned.append((threading.get_ident(), shape))
                with self.fake.lock:
                    self.fake.now += 99 * MS
            self.fake.request()

        return lambda: nullcontext(request)


def test_workers_keep_their_threads_so_per_thread_autotuning_happens_once_and_outside_the_windows():
    """The H200 defect (benchmarks/results/gpu_serving-2026-12-01-defect): fresh threads per window
    re-autotuned inside every window. Now: one tuning per thread and shape over all windows, done by
    the priming request before the barrier, so no measured request carries it."""
    fake = FakeTime()
    cache = FakeThreadLocalPlanCache(fake)
    with serving.Workers(2) as workers:
        windows = [run_window([cache.session(shape)] * 2, ServingConfig(warmup_s=0.0, window_s=0.02, min_requests=1),
                              workers=workers, clock=fake.clock, sleep=fake.sleep)
                   for shape in ("batch 1", "batch 8", "batch 1", "batch 8")]
    assert sorted(s for _, s in cache.tuned) == ["batch 1", "batch 1", "batch 8", "batch 8"]  # 2 threads × 2 shapes
    assert len({t for t, _ in cache.tuned}) == 2
    for w in windows:
        assert w.requests > 0 and w.latencies_ms.max() < 100  # 1 ms each, + the other worker's: never a tuning
    # the defect itself: a window on threads of its own (what every window did) tunes again, per thread
    run_window([cache.session("batch 1")] * 2, ServingConfig(warmup_s=0.0, window_s=0.02, min_requests=1),
               clock=fake.clock, sleep=fake.sleep)
    assert len(cache.tuned) == 6


def test_a_window_without_workers_of_its_own_runs_on_threads_it_ends():
    before = threading.active_count()
    fake = FakeTime()
    run_window(_sessions(fake, 3), ServingConfig(warmup_s=0.0, window_s=0.01, min_requests=1),
               clock=fake.clock, sleep=fake.sleep)
    assert threading.active_count() == before
    with pytest.raises(ValueError, match="3 sessions need 3 workers, got 2"), serving.Workers(2) as two:
        run_window(_sessions(fake, 3), ServingConfig(warmup_s=0.0, window_s=0.01), workers=two)


def test_cpu_sessions_split_the_intra_op_threads_and_close_their_runners():
    made, closed = [], []

    class FakeRunner:
        def __init__(self, threads):
            self.threads = threads

        def infer(self, feeds):
            return {}

        def close(self):
            closed.append(self)

    def load(threads):
        made.append(FakeRunner(threads))
        return made[-1]

    with cpu_sessions(None, 4, {}, load=load, threads=8) as (sessions, info):
        assert len(sessions) == 4 and [r.threads for r in made] == [2, 2, 2, 2]
        assert info == {"kind": "cpu", "sessions": 4, "threads_total": 8, "intra_op_threads_per_session": 2,
                        "oversubscribed": False}
    assert len(closed) == 4
    with cpu_sessions(None, 4, {}, load=load, threads=3) as (_, info):
        assert info["intra_op_threads_per_session"] == 1 and info["oversubscribed"] is True
    with cpu_sessions(FakeRunner(0), 3, {}) as (sessions, info):
        assert info == {"kind": "cpu", "sessions": 1, "shared_by_threads": 3}


@pytest.mark.parametrize("kwargs, message", [({"concurrency": ()}, "--concurrency"),
                                             ({"concurrency": (0, 2)}, "--concurrency"),
                                             ({"window_s": 0}, "--window-s"),
                                             ({"rounds": 0}, "--serving-rounds"),
                                             ({"slo_ms": 0.0}, "--slo-ms")])
def test_config_refuses_bad_settings(kwargs, message):
    with pytest.raises(BadInput, match=message):
        ServingConfig(**kwargs)


# ---- SLO ---------------------------------------------------------------------------------------

def _point(arm, batch, level, rates, p99_ms, rounds=None):
    """A point whose windows have the given request rates (1 s windows) and whose p99 is ``p99_ms``."""
    from trtprof.serving.sweep import Point

    p = Point(arm=arm, precision=arm.split("#")[0], backend="fake", model="m", batch_size=batch, concurrency=level)
    for rate in rates[: rounds or len(rates)]:
        n = max(int(rate), 100)
        lat = np.full(n, p99_ms * 0.5)
        lat[-1:] = p99_ms  # the top 1 % at p99_ms … exactly: percentile 99 of n values
        lat[int(n * 0.985):] = p99_ms
        p.windows.append(Window(latencies_ms=lat, wall_s=n / rate, per_worker=[n]))
    return p


def test_best_point_is_the_fastest_that_meets_the_target_just_inside_not_just_outside():
    from trtprof.stats.slo import best_point

    slow = _point("fp32", 1, 1, [100, 100, 100], p99_ms=2.0)
    fast = _point("fp32", 8, 4, [400, 400, 400], p99_ms=5.0)
    assert best_point([slow, fast], 5.0 + 1e-9) is fast
    assert best_point([slow, fast], 5.0 - 1e-9) is slow
    assert best_point([slow, fast], 1.0) is None


def test_slo_verdict_reuses_the_speedup_ci_on_paired_rounds():
    from trtprof.stats.slo import at_target

    rng = np.random.default_rng(0)
    drift = 1 + 0.02 * rng.standard_normal(8)  # each round's drift hits both precisions alike
    points = [_point("fp32", 1, 1, list(1000 * drift), 3.0), _point("fp32", 8, 2, list(3000 * drift), 9.0),
              _point("fp16", 1, 1, list(1100 * drift), 2.5), _point("fp16", 8, 2, list(6000 * drift), 4.0)]
    slo = at_target(points, ["fp32", "fp16"], 5.0)
    assert slo["best"]["fp32"]["batch_size"] == 1 and slo["best"]["fp16"]["batch_size"] == 8
    (v,) = slo["verdicts"]
    expected = 6000 * 8 / (1000 * 1)  # samples/s: 8 per request at 6000 req/s vs 1 per request at 1000
    assert v["verdict"] == "faster" and v["ci_low"] <= expected <= v["ci_high"]
    assert v["estimate"] == pytest.approx(expected, rel=1e-6) and v["rounds"] == 8
    assert "trtprof.stats.speedup" in slo["method"]


def test_slo_verdict_is_inconclusive_with_a_reason_when_a_precision_misses_or_has_one_round():
    from trtprof.stats.slo import at_target

    miss = at_target([_point("fp32", 1, 1, [100, 100], 9.0), _point("fp16", 1, 1, [100, 100], 2.0)],
                     ["fp32", "fp16"], 5.0)
    assert miss["verdicts"][0]["verdict"] == "inconclusive"
    assert "fp32: no measured point has p99 ≤ 5 ms; the lowest p99 is 9 ms" in miss["verdicts"][0]["reason"]
    one = at_target([_point("fp32", 1, 1, [100], 2.0), _point("fp16", 1, 1, [200], 2.0)], ["fp32", "fp16"], 5.0)
    assert one["verdicts"][0]["verdict"] == "inconclusive" and "1 round: no interval" in one["verdicts"][0]["reason"]


# ---- the sweep and the CLI on a real (small) ONNX Runtime model ---------------------------------

@pytest.fixture
def engines(tmp_path: Path) -> Path:
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.model.demo import make_demo_model
    from trtprof.spec import Precision

    model = make_demo_model(tmp_path / "net.onnx", channels=8, image=16, classes=10)
    build_engines(model, [Precision.FP32, Precision.FP16], (1, 2),
                  settings=BuildSettings(engines_dir=tmp_path / "engines", backend="onnxruntime"))
    return tmp_path / "engines"


def test_bench_concurrency_sweep_and_slo_in_the_results_json(engines, tmp_path, capsys):
    from trtprof.cli import main
    from trtprof.measure.results import ResultSet

    out = tmp_path / "r.json"
    assert main(["bench", str(engines), "--iterations", "5", "--warmup", "1", "--concurrency", "1,2",
                 "--slo-ms", "1000", "--window-s", "0.05", "--serving-rounds", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "in flight" in text and "at p99 <= 1000 ms: fp16 vs fp32" in text
    (sweep,) = ResultSet.read(out).serving
    assert sweep["arms"] == ["fp32", "fp16"] and sweep["settings"]["concurrency"] == [1, 2]
    # 2 rounds: the stamp says no interval over rounds exists (system.validity.MIN_SERVING_ROUNDS)
    assert not sweep["validity"]["valid"] and "too_few_rounds" in [r["code"] for r in sweep["validity"]["reasons"]]
    assert "serving: NOT VALID: " in text and "2 serving round(s)" in text
    points = {(p["arm"], p["batch_size"], p["concurrency"]): p for p in sweep["points"]}
    assert set(points) == {(a, b, c) for a in ("fp32", "fp16") for b in (1, 2) for c in (1, 2)}
    for (arm, batch, level), p in points.items():
        assert len(p["rounds"]) == 2 and all(r["requests"] > 0 for r in p["rounds"])
        assert p["samples_per_s"] == pytest.approx(p["requests_per_s"] * batch)
        assert p["requests_per_s"] == pytest.approx(np.median([r["requests_per_s"] for r in p["rounds"]]))
        assert p["sessions"]["sessions"] == level and p["sessions"]["intra_op_threads_per_session"] >= 1
        assert p["energy"]["status"] == "n/a" and "CPU" in p["energy"]["reason"]
        assert p["memory"]["kind"] == "host_rss" and p["artifact_bytes"] > 0
    slo = sweep["slo"]
    assert slo["slo_p99_ms"] == 1000 and set(slo["best"]) == {"fp32", "fp16"}
    assert slo["verdicts"][0]["rounds"] == 2 and slo["verdicts"][0]["verdict"] in ("faster", "slower", "equivalent",
                                                                                   "inconclusive")
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    text = capsys.readouterr().out  # the Markdown summary names the sweep and its verdict, not only the HTML
    assert "Serving sweep: 8 points" in text and "- at p99 <= 1000 ms: fp16 vs fp32" in text


def test_compare_concurrency_and_slo_and_the_report_section(engines, tmp_path, capsys):
    from trtprof.cli import main
    from trtprof.report.compare_page import write_report

    out = tmp_path / "c.json"
    assert main(["compare", str(engines), "--batch-sizes", "1", "--time-budget-s", "1", "--in-process",
                 "--concurrency", "1,2", "--slo-ms", "1000", "--window-s", "0.05", "--serving-rounds", "2",
                 "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["serving"]["arms"] == ["fp32", "fp16"] and len(data["serving"]["points"]) == 4
    assert data["serving"]["slo"]["verdicts"][0]["candidate"] == "fp16"
    for r in data["results"]:  # memory and size per arm in compare's results too
        assert r["engine"]["artifact_bytes"] > 0 and r["memory"]["kind"] == "host_rss"
        assert "accuracy pass" in r["memory"]["measured_during"]
    page, _ = write_report(out, tmp_path / "c.html")
    body = page.read_text()
    assert "<h2>Memory and size</h2>" in body
    assert "Throughput under concurrency" in body and "Throughput at p99" in body and "data:image/png;base64" in body


@pytest.mark.parametrize("argv, message", [
    (["--slo-ms", "5"], "--slo-ms needs --concurrency"),
    (["--concurrency", "0,2"], "--concurrency"),
    (["--concurrency", "1,x"], "--concurrency"),
    (["--concurrency", "1", "--window-s", "0"], "--window-s"),
])
def test_bad_serving_options_exit_2_with_one_line(engines, tmp_path, capsys, argv, message):
    from trtprof.cli import main

    assert main(["bench", str(engines), "--out", str(tmp_path / "x.json"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "x.json").exists()


def test_concurrency_above_the_cap_is_refused():
    import argparse

    from trtprof.cli._serving import MAX_CONCURRENCY, concurrency_levels

    assert concurrency_levels(f"1,{MAX_CONCURRENCY}") == (1, MAX_CONCURRENCY)
    with pytest.raises(argparse.ArgumentTypeError):
        concurrency_levels(f"{MAX_CONCURRENCY + 1}")


def test_gpu_serving_benchmark_lines_nvidia_smi_up_with_the_windows(tmp_path, monkeypatch):
    """benchmarks/gpu_serving.py's cross-check: nvidia-smi lines (local-time stamps) inside each window's
    wall-clock edges, mean power × length, against the NVML counter's joules."""
    import datetime as dt
    import sys

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    sys.modules.pop("gpu_serving", None)
    import gpu_serving

    t0 = 1_800_000_000.0
    stamp = lambda t: dt.datetime.fromtimestamp(t).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]  # noqa: E731
    log = tmp_path / "smi.csv"
    log.write_text("".join(f"{stamp(t0 + i * 0.1)}, {200.0 if i < 10 else 400.0}\n" for i in range(20))
                   + "garbage line\n")
    readings = gpu_serving.read_power_log(log)
    assert len(readings) == 20 and readings[0][1] == 200.0
    sweep = {"points": [{"arm": "fp16", "rounds": [
        {"started_unix": t0, "ended_unix": t0 + 0.9, "energy": {"status": "ok", "joules": 180.0, "inferences": 90}},
        {"started_unix": t0 + 1.0, "ended_unix": t0 + 1.9, "energy": {"status": "ok", "joules": 360.0, "inferences": 90}},
        {"started_unix": t0 + 5.0, "ended_unix": t0 + 6.0, "energy": {"status": "ok", "joules": 1.0, "inferences": 1}},
    ]}]}
    check = gpu_serving.cross_check(sweep, readings)["fp16"]
    assert check["windows"] == 2 and check["smi_readings"] == 20  # the third window has no readings: left out
    assert check["smi_joules"] == pytest.approx(200 * 0.9 + 400 * 0.9)
    assert check["nvml_over_smi"] == pytest.approx(1.0) and check["nvml_joules_per_inference"] == pytest.approx(3.0)
    assert check["nvml_over_smi_instant"] is None  # no power.draw.instant column in this log


def test_gpu_serving_cross_checks_instant_power_and_the_whole_run(tmp_path, monkeypatch):
    """With power.draw.instant logged, the per-window check uses it too; over the whole run the counter is
    compared with each column integrated: a 1-s average reading low (300 W vs 400 W) shows as 1.33."""
    import datetime as dt
    import sys

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    sys.modules.pop("gpu_serving", None)
    import gpu_serving

    t0 = 1_800_000_000.0
    stamp = lambda t: dt.datetime.fromtimestamp(t).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]  # noqa: E731
    log = tmp_path / "smi.csv"
    log.write_text("".join(f"{stamp(t0 + i * 0.1)}, 300.0, 400.0\n" for i in range(101)))
    readings = gpu_serving.read_power_log(log)
    sweep = {"points": [{"arm": "fp32", "rounds": [
        {"started_unix": t0, "ended_unix": t0 + 1.0, "energy": {"status": "ok", "joules": 400.0, "inferences": 10}}]}]}
    check = gpu_serving.cross_check(sweep, readings)["fp32"]
    assert check["nvml_over_smi_instant"] == pytest.approx(1.0)
    assert check["nvml_over_smi"] == pytest.approx(4 / 3)
    lines = gpu_serving.whole_run((t0, 0, t0 + 10.0, 4_000_000), readings)  # 4,000 J over 10 s: 400 W
    assert "ratio 1.333" in lines[0] and "power.draw integrated" in lines[0]
    assert "ratio 1.000" in lines[1] and "power.draw.instant" in lines[1]
    assert gpu_serving.whole_run(None, readings) == ["whole run: no NVML counter read (no cross-check over the run)"]


def test_plot_draws_the_latency_throughput_curve_of_a_bench_sweep(engines, tmp_path, capsys):
    from trtprof.cli import main

    out = tmp_path / "r.json"
    assert main(["bench", str(engines), "--batch-sizes", "1", "--iterations", "5", "--warmup", "1",
                 "--concurrency", "1,2", "--window-s", "0.05", "--serving-rounds", "1", "--out", str(out)]) == 0
    assert main(["plot", str(out), "--out", str(tmp_path / "plots")]) == 0
    png = tmp_path / "plots" / "latency_vs_throughput.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(png) in capsys.readouterr().out


def test_a_point_that_runs_out_of_memory_is_recorded_and_the_sweep_goes_on(engines, monkeypatch, capsys):
    """The largest batch that fits, per precision: an out-of-memory point (here a FAKE MemoryError for
    fp16 at batch 2) is kept as "did not fit", not measured again, and the rest is measured."""
    from trtprof.serving import sweep as serving_sweep
    from trtprof.engines.cache import list_engines
    from trtprof.cli._serving import print_sweep

    real = serving_sweep.measure_point
    calls = []

    def measure(record, runner, level, feeds, batch_size, config, load=None, **kwargs):
        calls.append((record.precision, batch_size, level))
        if record.precision == "fp16" and batch_size == 2:
            raise MemoryError("fake: out of memory at this batch")
        return real(record, runner, level, feeds, batch_size, config, load, **kwargs)

    monkeypatch.setattr(serving_sweep, "measure_point", measure)
    (arms,) = serving_sweep.group_arms(list_engines(engines))
    sweep = serving_sweep.sweep_records(arms, (1, 2), ServingConfig(concurrency=(1,), window_s=0.03, rounds=2,
                                                                     slo_ms=1000.0)).to_json()
    assert calls.count(("fp16", 2, 1)) == 1  # not tried again in round 2
    assert sweep["fits"]["fp16"]["largest_batch_measured"] == 1
    assert sweep["fits"]["fp16"]["did_not_fit"] == [{"batch_size": 2, "concurrency": 1,
                                                     "reason": "did not fit: MemoryError: fake: out of memory at this batch"}]
    assert sweep["fits"]["fp32"] == {"largest_batch_measured": 2, "did_not_fit": []}
    assert sweep["slo"]["best"]["fp16"]["batch_size"] == 1
    print_sweep(sweep)
    assert "memory: fp16: largest batch measured 1; did not fit: batch 2 ×1" in capsys.readouterr().out


def test_the_sweep_runs_every_window_on_one_set_of_long_lived_workers(engines, monkeypatch):
    """Per-thread state (PyTorch's cuDNN plans) must outlive a window: every point of every round gets
    the same ``Workers``, as many as the highest concurrency level."""
    from trtprof.serving import sweep as serving_sweep
    from trtprof.engines.cache import list_engines

    real = serving_sweep.measure_point
    seen = []

    def measure(record, runner, level, feeds, batch_size, config, slots):
        seen.append(slots.workers)
        assert slots.streams is None  # CPU engines: no CUDA streams
        return real(record, runner, level, feeds, batch_size, config, slots)

    monkeypatch.setattr(serving_sweep, "measure_point", measure)
    (arms,) = serving_sweep.group_arms(list_engines(engines))
    serving_sweep.sweep_records(arms, (1,), ServingConfig(concurrency=(1, 2), window_s=0.02, rounds=2))
    assert len(seen) == 2 * 2 * 2 and seen[0] is not None  # arms × levels × rounds
    assert all(w is seen[0] for w in seen) and len(seen[0]) == 2


def test_the_sweep_stops_before_a_point_when_told_and_keeps_what_it_measured(engines):
    from trtprof.serving import sweep as serving_sweep
    from trtprof.engines.cache import list_engines

    (arms,) = serving_sweep.group_arms(list_engines(engines))
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 3  # three points measured, the fourth refused

    sweep = serving_sweep.sweep_records(arms, (1, 2), ServingConfig(concurrency=(1,), window_s=0.02, rounds=2),
                                        hooks=serving_sweep.SweepHooks(stop=stop)).to_json()
    assert sum(len(p["rounds"]) for p in sweep["points"]) == 3
    assert all(p["rounds"] for p in sweep["points"])  # no empty point for what was never started


def test_other_failures_are_not_taken_for_out_of_memory(engines, monkeypatch):
    from trtprof.serving import sweep as serving_sweep
    from trtprof.engines.cache import list_engines

    def measure(*args, **kwargs):
        raise RuntimeError("engine broke")

    monkeypatch.setattr(serving_sweep, "measure_point", measure)
    (arms,) = serving_sweep.group_arms(list_engines(engines))
    with pytest.raises(RuntimeError, match="engine broke"):
        serving_sweep.sweep_records(arms, (1,), ServingConfig(concurrency=(1,), window_s=0.03, rounds=1))


@pytest.mark.parametrize("margin", [None, "0.2"])
def test_compare_margin_reaches_the_serving_verdicts(engines, tmp_path, margin):
    """Issue 41, item 3: ``--margin`` is the margin of every verdict of the run, the throughput verdicts at
    the p99 target included (the serving sweep used the default whatever --margin said)."""
    from trtprof.cli import main
    from trtprof.stats.speedup import EQUIVALENCE_MARGIN

    out = tmp_path / "c.json"
    extra = ["--margin", margin] if margin else []
    assert main(["compare", str(engines), "--batch-sizes", "1", "--time-budget-s", "1", "--in-process",
                 "--concurrency", "1", "--slo-ms", "1000", "--window-s", "0.05", "--serving-rounds", "2",
                 *extra, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    want = float(margin) if margin else EQUIVALENCE_MARGIN
    assert data["serving"]["slo"]["margin"] == want
    assert all(c["speedup"]["margin"] == want for c in data["comparisons"])


def test_serving_rounds_help_names_what_a_valid_stamp_needs(capsys):
    """Issue 44, item 6: the help said '>= 2' where the verdict's interval (stats.slo) and a VALID serving stamp
    both need MIN_SERVING_ROUNDS (3); a 2-round run gives the ratio without an interval."""
    from trtprof.cli import main
    from trtprof.system.validity import MIN_SERVING_ROUNDS

    for command in ("bench", "compare"):
        try:
            main([command, "--help"])
        except SystemExit:
            pass
        text = " ".join(capsys.readouterr().out.split())
        assert f"the verdict's CI and a VALID stamp need >= {MIN_SERVING_ROUNDS}" in text
        assert "needs >= 2" not in text
