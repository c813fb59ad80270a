"""compare's priming (issue 42): before any timing, workers set up and run once, side by side, each arm whose first
run at a shape times no kernels (``primes_beside_others``: onnxruntime-cuda), so a load's first block no longer
pays the process's first runs. The worker's side with FAKE runners (named as such), the parent's protocol with a
real ONNX Runtime worker process (a CPU runner: it does not opt in, so nothing is primed and nothing changes)."""
from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from trtprof.measure import timing, workers
from trtprof.measure.interleave import ROUND_WARMUP
from trtprof.measure.timing import Samples, TimingConfig
from trtprof.measure.worker_loop import _WorkerState, feeds_key
from trtprof.model.inputs import make_inputs
from trtprof.spec import TensorSpec

SHAPES = {1: {"x": (1, 4)}, 8: {"x": (8, 4)}}


class FakeGpuRunner:
    """FAKE runner: claims to be a CUDA runner that may be primed beside other workers."""

    device = "cuda"
    primes_beside_others = True
    inputs = (TensorSpec("x", "float32", (-1, 4)),)

    def __init__(self, name):
        self.name = name


def primed_state(monkeypatch, fail_at=None):
    calls = []

    def fake_prime(runner, feeds, config):
        if fail_at is not None and feeds["x"].shape[0] == fail_at:
            raise MemoryError("cudaMalloc: out of memory")
        warnings.warn("a library line while priming", RuntimeWarning, stacklevel=1)
        calls.append((runner.name, feeds["x"].shape, config.cuda_graph))

    monkeypatch.setattr(timing, "prime_launch", fake_prime)
    state = _WorkerState(None)
    state.runners = {"fp32": FakeGpuRunner("fp32"), "fp16": FakeGpuRunner("fp16"),
                     "cpu": SimpleNamespace(name="cpu", device="cpu", inputs=FakeGpuRunner.inputs)}
    return state, calls


def test_a_worker_primes_the_opted_in_arms_at_every_batch_and_keeps_the_inputs(monkeypatch):
    state, calls = primed_state(monkeypatch)
    kind, answer = state.prime(list(SHAPES.items()), 3, (0, 10), TimingConfig(cuda_graph=True))
    assert kind == "ok" and answer["primed"] == [1, 8] and answer["notes"] == []
    assert calls == [("fp32", (1, 4), True), ("fp16", (1, 4), True), ("fp32", (8, 4), True), ("fp16", (8, 4), True)]
    made = state.made[feeds_key(SHAPES[8], 3, (0, 10))]
    state.set_feeds(SHAPES[8], 3, (0, 10), None)
    assert state.feeds is made and feeds_key(SHAPES[8], 3, (0, 10)) not in state.made  # used once, then dropped
    np.testing.assert_array_equal(state.feeds["x"], make_inputs(FakeGpuRunner.inputs, SHAPES[8], seed=3,
                                                                int_range=(0, 10))["x"])
    state.set_feeds(SHAPES[8], 4, (0, 10), None)  # another seed: made afresh
    assert state.feeds is not made


def test_what_the_library_wrote_priming_goes_to_that_batchs_warm_up_block(monkeypatch):
    from trtprof.measure import interleave

    state, _ = primed_state(monkeypatch)
    del state.runners["cpu"]
    state.prime([(8, SHAPES[8])], 0, (0, 10), TimingConfig())
    monkeypatch.setattr(interleave, "measure_block", lambda r, f, c: Samples(
        stages={"latency_ms": np.ones(2)}, span_s=0.0, warmup_done=0, warmup_s=0.0, run_warnings=["timed line"]))
    state.set_feeds(SHAPES[8], 0, (0, 10), None)
    _, warm = state.warm(TimingConfig())
    for samples in warm.values():
        assert any("a library line while priming" in line for line in samples.run_warnings)
        assert samples.run_warnings[-1] == "timed line"
    _, again = state.warm(TimingConfig())  # kept once: the next warm-up block carries only its own
    assert all(s.run_warnings == ["timed line"] for s in again.values())


def test_a_failure_stops_priming_with_its_reason_and_no_arm_opted_in_primes_nothing(monkeypatch):
    state, calls = primed_state(monkeypatch, fail_at=8)
    _, answer = state.prime(list(SHAPES.items()), 0, (0, 10), TimingConfig())
    assert answer["primed"] == [1] and len(answer["notes"]) == 1
    assert answer["notes"][0].startswith("batch 8: not primed (MemoryError: cudaMalloc: out of memory")
    assert feeds_key(SHAPES[8], 0, (0, 10)) not in state.made
    cpu_only, calls2 = primed_state(monkeypatch)
    cpu_only.runners = {"cpu": cpu_only.runners["cpu"]}
    _, answer = cpu_only.prime(list(SHAPES.items()), 0, (0, 10), TimingConfig())
    assert answer["primed"] == [] and calls2 == [] and cpu_only.made == {}


class ExpectingRunner(FakeGpuRunner):
    """FAKE runner that takes ``expect_shapes`` (as onnxruntime-cuda's does): records when it is told."""

    def __init__(self, name, log, fail=False):
        super().__init__(name)
        self.log, self.fail = log, fail

    def expect_shapes(self, shapes, own_sessions=False):
        self.own_sessions = own_sessions
        if self.fail:
            raise RuntimeError("CUDA failure 2: out of memory")
        warnings.warn(f"{self.name} ran ahead", RuntimeWarning, stacklevel=1)
        self.log.append((self.name, "expect", [s["x"] for s in shapes]))


def test_a_worker_tells_every_batch_sizes_shapes_before_priming_any(monkeypatch):
    """Issue 42: ORT's CUDA graphs at two batch sizes in one session replay without fault only where the session
    ran at both before its first capture: the worker tells the runner every shape before the first prime_launch."""
    from trtprof.measure import interleave

    state, calls = primed_state(monkeypatch)
    state.runners = {"fp32": ExpectingRunner("fp32", calls), "fp16": ExpectingRunner("fp16", calls, fail=True)}
    _, answer = state.prime(list(SHAPES.items()), 0, (0, 10), TimingConfig(cuda_graph=True))
    # the first batch size's shapes run ahead last: its priming launch follows at the shape ORT's kernels are set up at
    assert calls[0] == ("fp32", "expect", [(8, 4), (1, 4)]) and len(calls) == 5  # then 2 arms × 2 batch sizes
    assert [c[1] for c in calls[1:3]] == [(1, 4), (1, 4)]
    assert answer["primed"] == [1, 8]
    assert answer["notes"] == ["fp16: shapes not run ahead (RuntimeError: CUDA failure 2: out of memory)"]
    monkeypatch.setattr(interleave, "measure_block", lambda r, f, c: Samples(
        stages={"latency_ms": np.ones(2)}, span_s=0.0, warmup_done=0, warmup_s=0.0, run_warnings=[]))
    state.set_feeds(SHAPES[1], 0, (0, 10), None)
    _, warm = state.warm(TimingConfig())  # what it wrote running ahead: with the first batch size primed
    assert any("fp32 ran ahead" in line for line in warm["fp32"].run_warnings)
    assert not any("ran ahead" in line for line in warm["fp16"].run_warnings)


def test_what_a_runner_wrote_running_ahead_reaches_the_first_warm_up_even_where_priming_stopped(monkeypatch):
    from trtprof.measure import interleave

    state, calls = primed_state(monkeypatch, fail_at=1)
    state.runners = {"fp32": ExpectingRunner("fp32", calls)}
    _, answer = state.prime(list(SHAPES.items()), 0, (0, 10), TimingConfig(cuda_graph=True))
    assert answer["primed"] == [] and calls == [("fp32", "expect", [(8, 4), (1, 4)])]
    monkeypatch.setattr(interleave, "measure_block", lambda r, f, c: Samples(
        stages={"latency_ms": np.ones(2)}, span_s=0.0, warmup_done=0, warmup_s=0.0, run_warnings=[]))
    state.set_feeds(SHAPES[1], 0, (0, 10), None)
    _, warm = state.warm(TimingConfig())
    assert any("fp32 ran ahead" in line for line in warm["fp32"].run_warnings) and state.prime_lines == {}


class RecordingWorker:
    """FAKE parent-side worker: records the commands a WorkerLoad sends."""

    def __init__(self, primed):
        self.primed, self.sent = primed, []

    def call(self, *message):
        self.sent.append(message)
        return {}

    def ask(self, *message):
        self.sent.append(message)

    def answer(self, who=None):
        return {}


@pytest.mark.parametrize("told", [None, 0, 1, 2])
@pytest.mark.parametrize("as_round", [True, False])
@pytest.mark.parametrize("primed", [True, False])
def test_a_primed_loads_warm_up_needs_only_a_rounds_calls(primed, as_round, told, monkeypatch):
    """A primed worker's load warms up with a round's warm-up calls: ``ROUND_WARMUP`` until the loop tells it the
    rounds' (``round_warmup``), the told count after (``blocks.PRIMED_WARMUP_AS_ROUND``; off, ``ROUND_WARMUP``
    whatever it is told); the plan's warm-up time stays. Not primed: the full count. (A FAKE recording worker.)"""
    from trtprof.measure import blocks

    monkeypatch.setattr(blocks, "PRIMED_WARMUP_AS_ROUND", as_round)
    shapes = {"x": (8, 4)}
    worker = RecordingWorker({feeds_key(shapes, 0, (0, 10))} if primed else set())
    load = workers.WorkerLoad(worker, (shapes, 0, (0, 10), None))
    if told is not None:
        load.round_warmup = told
    load.warm_up(TimingConfig(warmup=10, warmup_ms=100.0, iterations=5))
    (_, config), = [m for m in worker.sent if m[0] == "warm"]
    rounds = told if told is not None and as_round else ROUND_WARMUP
    assert config.warmup == (rounds if primed else 10) and config.warmup_ms == 100.0
    other_seed = RecordingWorker({feeds_key(shapes, 1, (0, 10))})
    workers.WorkerLoad(other_seed, (shapes, 0, (0, 10), None)).warm_up(TimingConfig(warmup=10))
    assert other_seed.sent[-1][1].warmup == 10  # primed on other inputs: the full count


pytest.importorskip("onnxruntime")


def test_a_real_worker_answers_priming_in_order_and_a_cpu_runner_is_not_primed(conv_model, tmp_path):
    from trtprof.builder.pipeline import BuildSettings, build_engines
    from trtprof.spec import Precision

    (outcome,) = build_engines(conv_model, [Precision.FP32], [1],
                               settings=BuildSettings(engines_dir=tmp_path / "e", backend="onnxruntime"))
    pool = workers.WorkerPool({"fp32": outcome.record})
    try:
        pool.spawn(1)
        assert pool.prime([(1, {"input": (1, 3, 16, 16)})], 0, (0, 100), TimingConfig()) == 1
        pool.settle()
        (span,) = [s for s in pool.busy if s.what == "worker 0 priming"]
        assert span.end is not None and span.end >= span.start
        assert pool.workers[0].primed == set() and pool.workers[0].prime_notes == []
        load = pool.load(0, {"input": (1, 3, 16, 16)}, 0, (0, 100))
        warm = load.warm_up(TimingConfig(warmup=1, iterations=3))  # the protocol still in step after the prime
        assert warm["fp32"].n == 3
    finally:
        pool.close()


def test_where_priming_stopped_is_kept_in_the_runs_record():
    """The parent's side of a priming answer that stopped early (a FAKE worker object: no process, its answer
    given): the reason is kept on the worker and named in the span the run's concurrency record keeps."""
    worker = workers.Worker.__new__(workers.Worker)
    worker.index, worker._ready, worker._priming_since = 2, True, 5.0
    worker._prime_keys = {1: "k1", 8: "k8"}
    worker._receive = lambda who=None: {"primed": [1], "notes": ["batch 8: not primed (MemoryError: oom)"],
                                        "done_at": 6.0}
    span = worker.wait_primed()
    assert worker.primed == {"k1"} and worker.prime_notes == ["batch 8: not primed (MemoryError: oom)"]
    assert span.what == "worker 2 priming (batch 8: not primed (MemoryError: oom))" and (span.start, span.end) == (5.0, 6.0)
    assert worker.wait_primed() is None  # read once


class RecordingPoolWorker:
    """FAKE worker object (no process): records what the pool asks of it, in order, in a shared log."""

    def __init__(self, index, log):
        self.index, self.log = index, log

    def prime(self, batches, seed, int_range, config):
        self.log.append((self.index, "prime"))

    def wait_ready(self, who=None):
        self.log.append((self.index, "wait_ready"))

    def wait_primed(self):
        self.log.append((self.index, "wait_primed"))

    def ask(self, *message):
        self.log.append((self.index, message[0]))

    def answer(self, who=None):
        return {"outputs": {1: ({}, {})}, "done_at": 0.0}


def recording_pool(count):
    pool = workers.WorkerPool({})
    log = []
    pool.workers = [RecordingPoolWorker(i, log) for i in range(count)]
    pool.spawn = lambda n: None
    return pool, log


@pytest.mark.parametrize("after_outputs", [False, True])
def test_the_accuracy_pass_runs_beside_the_others_priming_only_where_asked(after_outputs):
    pool, log = recording_pool(3)
    assert pool.prime([(1, SHAPES[1])], 0, (0, 10), TimingConfig(), after_outputs=after_outputs) == 3
    pool.outputs([(1, SHAPES[1], 0)], 0, (0, 10))
    if after_outputs:  # load 0 primes after its accuracy pass; nobody's priming is waited for before it
        assert log == [(1, "prime"), (2, "prime"), (0, "outputs"), (0, "prime")]
        assert pool.busy[-1].what == "the accuracy pass (load 0's worker, beside the others' priming)"
    else:  # every worker primes first, and the accuracy pass waits for all of them (settle)
        assert log[:3] == [(0, "prime"), (1, "prime"), (2, "prime")]
        assert log[3:] == [(i, w) for i in range(3) for w in ("wait_ready", "wait_primed")] + [(0, "outputs")]
        assert pool.busy[-1].what == "the accuracy pass (load 0's worker)"
    log.clear()
    pool.outputs([(1, SHAPES[1], 0)], 0, (0, 10))  # a second pass: nothing deferred is asked twice
    assert (0, "prime") not in log


def test_the_compare_asks_for_the_pass_beside_priming_only_when_every_gpu_arm_primes_beside_others(monkeypatch):
    from trtprof.compare import reference_pass

    asked = {}

    class Pool:
        busy: list = []

        def __init__(self, facts):
            self._facts = facts

        def facts(self):
            return self._facts

        def prime(self, batches, seed, ints, config, after_outputs=False):
            asked["after_outputs"] = after_outputs
            return 2

        def outputs(self, batches, seed, ints):
            return {b: ({}, {}) for b, _, _ in batches}

    spec = (TensorSpec("x", "float32", (-1, 4)),)
    arm = lambda device, beside: workers.ArmFacts(spec, spec, device, None, beside)  # noqa: E731
    monkeypatch.setattr(reference_pass, "checked_shapes", lambda *a: ({1: {"x": (1, 4)}}, {1: 16}))
    monkeypatch.setattr(reference_pass, "range_deadline", lambda options, say: None)
    monkeypatch.setattr(reference_pass.fp16range, "for_compare", lambda *a, **k: None)
    options = SimpleNamespace(seed=0, ints=(0, 10), plan=SimpleNamespace(cuda_graph=True, copies=True))
    records = {"fp32": SimpleNamespace(), "fp16": SimpleNamespace()}
    for facts, expected in (({"fp32": arm("cuda", True), "fp16": arm("cuda", True)}, True),
                            ({"fp32": arm("cuda", True), "fp16": arm("cuda", False)}, False),
                            ({"fp32": arm("cpu", False), "fp16": arm("cuda", True)}, True)):
        asked.clear()
        reference_pass.from_worker(records, [1], options, None, Pool(facts))
        assert asked == {"after_outputs": expected}
    asked.clear()
    reference_pass.from_worker(records, [1], options, None, Pool({"fp32": arm("cpu", False), "fp16": arm("cpu", False)}))
    assert asked == {}  # no GPU arm: no priming


@pytest.mark.parametrize("accuracy_first", [False, True])
def test_priming_and_the_accuracy_pass_make_a_batchs_inputs_once(monkeypatch, accuracy_first):
    """Load 0's worker primes and runs the accuracy pass on the same seeded inputs: whichever runs first makes
    them, the other (and the first load's ``feeds``) takes them. FAKE runners (named so): ``infer`` echoes."""
    from trtprof.model import inputs as model_inputs

    state, calls = primed_state(monkeypatch)
    del state.runners["cpu"]
    for r in state.runners.values():
        r.infer = lambda feeds: {"y": feeds["x"] * 2}
    made = []
    real = model_inputs.make_inputs

    def counting(*a, **k):
        made.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr(model_inputs, "make_inputs", counting)
    prime = lambda: state.prime([(8, SHAPES[8])], 0, (0, 10), TimingConfig())  # noqa: E731
    accuracy = lambda: state.outputs([(8, SHAPES[8], 0)], 0, (0, 10))  # noqa: E731
    for step in ((accuracy, prime) if accuracy_first else (prime, accuracy)):
        kind, answer = step()
        assert kind == "ok"
    assert len(made) == 1 and len(calls) == 2
    kept = state.made[feeds_key(SHAPES[8], 0, (0, 10))]
    state.set_feeds(SHAPES[8], 0, (0, 10), None)
    assert state.feeds is kept and len(made) == 1


def test_shapes_run_ahead_end_at_the_first_batch_size():
    from trtprof.measure.worker_loop import shapes_ahead

    one, two, three = {"x": (1, 4)}, {"x": (32, 4)}, {"x": (256, 4)}
    assert shapes_ahead([one, two, three]) == [two, three, one]
    assert shapes_ahead([one]) == [one] and shapes_ahead([]) == []


def test_a_worker_alone_on_the_gpu_lets_each_batch_size_have_a_session_of_its_own(monkeypatch):
    """Lone loads (``LifeWorkers``) prime with ``alone``: the runner is told the shapes with ``own_sessions`` in the
    batch sizes' order (the first keeps the load's session, nothing runs ahead); side-by-side workers (``WorkerPool``)
    keep one session per load, the shapes run ahead, the first batch size's last."""
    for alone in (True, False):
        state, calls = primed_state(monkeypatch)
        state.runners = {"fp32": ExpectingRunner("fp32", calls)}
        state.prime(list(SHAPES.items()), 0, (0, 10), TimingConfig(cuda_graph=True), alone=alone)
        assert state.runners["fp32"].own_sessions is alone
        assert calls[0] == ("fp32", "expect", [(1, 4), (8, 4)] if alone else [(8, 4), (1, 4)])
        _, answer = state.prime(list(SHAPES.items()), 0, (0, 10), TimingConfig(cuda_graph=True), alone=alone)
        assert list(answer["seconds"])[0] == ("sessions opened" if alone else "shapes run ahead")


class AccuracyRunner(ExpectingRunner):
    """FAKE runner with the accuracy path: ``infer`` writes a line on fd 2 (as ORT's C++ logger does) and records
    whether it had been told its shapes by then."""

    def infer(self, feeds):
        import os

        os.write(2, f"{self.name} first run at {feeds['x'].shape[0]}\n".encode())
        self.log.append((self.name, "infer", feeds["x"].shape[0], getattr(self, "own_sessions", None)))
        return {"y": np.zeros((feeds["x"].shape[0], 2), np.float32)}


@pytest.mark.parametrize("alone", [True, False])
def test_life_0s_accuracy_pass_alone_runs_each_shape_on_the_session_that_times_it(monkeypatch, alone):
    """Lone loads: life 0's accuracy pass (``outputs`` with ``alone``) tells the arms that prime their shapes with their
    own sessions first, so each arm's run at a shape there is that shape's first run on the session priming and
    timing use (ORT builds the shape's cuDNN plans once); what the library wrote at those runs goes with the arm's
    priming lines to the batch's first warm-up block. Side by side (``WorkerPool``), the pass tells nothing and its
    lines are left out, as before (the timed blocks' first runs write them)."""
    from trtprof.measure import interleave

    state, calls = primed_state(monkeypatch)
    state.runners = {"fp32": AccuracyRunner("fp32", calls), "fp16": AccuracyRunner("fp16", calls)}
    state.load_rss = {"fp32": (None, None), "fp16": (None, None)}
    batches = [(b, SHAPES[b], 64) for b in SHAPES]
    kind, answer = state.outputs(batches, 0, (0, 10), alone)
    assert kind == "ok" and set(answer["outputs"]) == {1, 8}
    infers = [c for c in calls if c[1] == "infer"]
    assert len(infers) == 4 and all(c[3] is (True if alone else None) for c in infers)
    assert [c for c in calls if c[1] == "expect"] == ([("fp32", "expect", [(1, 4), (8, 4)]),
                                                       ("fp16", "expect", [(1, 4), (8, 4)])] if alone else [])
    monkeypatch.setattr(interleave, "measure_block", lambda r, f, c: Samples(
        stages={"latency_ms": np.ones(2)}, span_s=0.0, warmup_done=0, warmup_s=0.0, run_warnings=[]))
    for batch in SHAPES:
        state.set_feeds(SHAPES[batch], 0, (0, 10), None)
        _, warm = state.warm(TimingConfig())
        for arm in ("fp32", "fp16"):
            wrote = [line for line in warm[arm].run_warnings if "first run at" in line]
            assert wrote == ([f"{arm} first run at {batch}"] if alone else [])


def test_the_prime_message_carries_alone_and_life_workers_send_it():
    from trtprof.measure.serial_loads import LifePriming, LifeWorkers

    worker = workers.Worker.__new__(workers.Worker)
    sent = []
    worker._initialised, worker._priming_since, worker._send = True, None, sent.append
    worker.prime([(1, {"x": (1, 4)})], 0, (0, 10), TimingConfig(), alone=True)
    assert sent[0][0] == "prime" and sent[0][5:] == (True, None)
    asked = []
    lives0 = LifeWorkers({})
    lives0.start = lambda index: SimpleNamespace(ask=lambda *a: asked.append(a),
                                                 answer=lambda who=None: {"outputs": {}, "done_at": 0.0})
    lives0.outputs([(1, {"x": (1, 4)}, 16)], 0, (0, 10))
    assert asked[0][0] == "outputs" and asked[0][-1] is True  # life 0's accuracy pass: alone on the GPU

    class FakeLifeWorker:  # FAKE: records what start_life asks of a life's worker
        def __init__(self):
            self.asked = []

        def prime(self, *args, **kwargs):
            self.asked.append((args, kwargs))

        def wait_primed(self):
            return None

    fake = FakeLifeWorker()
    lives = LifeWorkers({}, priming=LifePriming([(1, {"x": (1, 4)})], 0, (0, 10), TimingConfig()))
    lives.start = lambda index: fake
    lives.begin_life([0])
    assert lives.start_life(0) is fake
    (args, kwargs), = fake.asked
    assert kwargs == {"alone": True, "side_by_side": None} and args[0] == [(1, {"x": (1, 4)})]


@pytest.mark.parametrize("side_by_side", [True, False])
def test_later_lives_make_the_first_runs_side_by_side_given_life_0s_lines(monkeypatch, side_by_side):
    """Life 0 primes one arm at a time (what the library wrote is told apart by arm there); every later life is asked
    to make its arms' first runs side by side and is given life 0's lines to attribute what it sees
    (``PRIME_SIDE_BY_SIDE``; off, every life primes as life 0 does). A life that primed side by side never becomes
    the reference. Its record says how it primed."""
    from trtprof.measure import serial_loads
    from trtprof.measure.serial_loads import LifePriming, LifeWorkers

    monkeypatch.setattr(serial_loads, "PRIME_SIDE_BY_SIDE", side_by_side)
    life0_lines = {1: {"fp32": ["cudnn line"], "fp16": []}}

    class FakeLifeWorker:  # FAKE: records what a life's worker is asked; answers priming with the given lines
        def __init__(self, index, lines, side):
            self.index, self.asked, self.prime_lines, self.primed_side_by_side = index, [], lines, side

        def prime(self, *args, **kwargs):
            self.asked.append(kwargs)

        def wait_primed(self):
            return None

    made = [FakeLifeWorker(0, life0_lines, False), FakeLifeWorker(1, {1: {"fp32": ["other"]}}, side_by_side),
            FakeLifeWorker(2, {}, side_by_side)]
    lives = LifeWorkers({}, priming=LifePriming([(1, {"x": (1, 4)})], 0, (0, 10), TimingConfig()))
    lives.start = lambda index: made[index]
    for index in range(3):
        lives.begin_life([0])
        lives.start_life(index)
    assert made[0].asked == [{"alone": True, "side_by_side": None}]
    for later in made[1:]:
        assert later.asked == [{"alone": True, "side_by_side": life0_lines if side_by_side else None}]
    assert lives.known_lines is life0_lines  # life 0's, never a side-by-side life's


def test_after_a_life_whose_side_by_side_first_runs_failed_the_next_ones_prime_one_arm_at_a_time():
    from trtprof.measure.serial_loads import LifePriming, LifeWorkers

    class FakeLifeWorker:  # FAKE: answers priming as told; records what it was asked
        def __init__(self, failed):
            self.asked, self.prime_lines, self.primed_side_by_side = [], {1: {"fp32": []}}, False
            self.side_by_side_failed = failed

        def prime(self, *args, **kwargs):
            self.asked.append(kwargs["side_by_side"] is not None)
            self.primed_side_by_side = self.asked[-1]

        def wait_primed(self):
            return None

    made = [FakeLifeWorker(False), FakeLifeWorker(True), FakeLifeWorker(False)]
    lives = LifeWorkers({}, priming=LifePriming([(1, {"x": (1, 4)})], 0, (0, 10), TimingConfig()))
    lives.start = lambda index: made[index]
    for index in range(3):
        lives.begin_life([0])
        lives.start_life(index)
    assert [w.asked for w in made] == [[False], [True], [False]]


def test_life_0_is_asked_to_prime_before_compare_imports_its_analysis_and_waited_for_once():
    """compare asks life 0 to prime (``begin_priming``: sent, not waited for) before importing scipy for its analysis
    (1.5 s of the H200 run's start-up, 2026-12-04e, with life 0 idle meanwhile); ``start_life`` then waits for that
    priming, asks nothing again, and only then is life 0 serving and life 1's process started ahead."""
    from trtprof.measure.serial_loads import LifePriming, LifeWorkers

    events = []

    class FakeLifeWorker:  # FAKE: records what is asked of life 0's worker, in order
        def prime(self, *args, **kwargs):
            events.append("prime asked")

        def wait_primed(self):
            events.append("prime waited")

    lives = LifeWorkers({}, priming=LifePriming([(1, {"x": (1, 4)}), (8, {"x": (8, 4)})], 0, (0, 10), TimingConfig()))
    fake = FakeLifeWorker()
    lives.start = lambda index: fake
    lives.start_ahead = lambda index: events.append(f"life {index} started ahead")
    lives.begin_life(range(2))
    assert lives.begin_priming(0) is fake and events == ["prime asked"]
    assert lives.start_life(0) is fake and lives.start_life(0) is fake
    assert events == ["prime asked", "prime waited", "life 1 started ahead"] and 0 in lives.serving


def test_measure_lives_asks_life_0_to_prime_before_the_analysis_imports(monkeypatch):
    from trtprof.compare import measuring

    order = []

    class FakeLives:  # FAKE LifeWorkers: records the calls measure_lives makes before measuring
        priming = None
        concurrent: dict = {}
        lives: list = []

        def begin_life(self, turns):
            order.append(("begin_life", list(turns)))

        def begin_priming(self, index):
            order.append(("begin_priming", index))

        def close(self):
            order.append(("close",))

    def stop_here(*args, **kwargs):
        order.append(("start_measuring",))
        raise KeyboardInterrupt

    monkeypatch.setattr(measuring, "start_measuring", stop_here)
    monkeypatch.setattr(measuring, "close_keeping_results", lambda lives, measured: lives.close())
    from trtprof.compare.options import CompareOptions
    from trtprof.measure.interleave import RoundPlan

    reference = SimpleNamespace(on_gpu=True, shapes={1: {"x": (1, 4)}, 8: {"x": (8, 4)}})
    options = CompareOptions(plan=RoundPlan(cuda_graph=True, copies=True), int_range=(0, 10))
    budget = SimpleNamespace(elapsed_s=lambda now: 0.0)
    with pytest.raises(KeyboardInterrupt):
        measuring.measure_lives({"fp32": None}, [1, 8], options, reference, SimpleNamespace(on_startup=None),
                                budget, FakeLives())
    assert order[:3] == [("begin_life", [0, 1]), ("begin_priming", 0), ("start_measuring",)]


@pytest.mark.parametrize("on_gpu, memory_bytes", [(True, 1000), (False, 999)])
def test_measure_lives_warms_primed_lives_up_shorter_on_a_gpu_only(monkeypatch, tmp_path, on_gpu, memory_bytes):
    """On a GPU every life primes its batch sizes before serving them, so the loops get ``RoundPlan.primed``'s
    warm-ups (and the results record them, from the same options); on the CPU nothing is primed: the plan as given.
    A life's exit overlaps the next one's engine loading where the engines' files (100 bytes here) are at most a tenth
    of the memory they load into (``serial_loads.exit_may_overlap``)."""
    from trtprof.compare import measuring
    from trtprof.compare.options import CompareOptions
    from trtprof.measure.interleave import RoundPlan

    plans = []

    class FakeLives:  # FAKE LifeWorkers: nothing to start
        priming = None
        concurrent: dict = {}
        lives: list = []

        def begin_life(self, turns):
            pass

        def begin_priming(self, index):
            pass

        def start_life(self, index):
            pass

        def end_life(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(measuring, "start_measuring", lambda *a, **k: None)
    monkeypatch.setattr(measuring, "worker_loads", lambda *a, **k: None)
    monkeypatch.setattr(measuring, "fixed_inputs", lambda *a, **k: None)
    monkeypatch.setattr(measuring, "loop_hooks", lambda *a, **k: None)
    monkeypatch.setattr(measuring.serial_loads, "run_lives", lambda names, opens, plan, **k: plans.append(plan))
    monkeypatch.setattr(measuring.serial_loads, "loading_memory_bytes", lambda gpu: memory_bytes if gpu == on_gpu else 0)
    engine = tmp_path / "m.onnx"
    engine.write_bytes(b"x" * 100)
    reference = SimpleNamespace(on_gpu=on_gpu, shapes={1: {"x": (1, 4)}})
    options = CompareOptions(plan=RoundPlan(cuda_graph=on_gpu), int_range=(0, 10))
    lives = FakeLives()
    measuring.measure_lives({"fp32": SimpleNamespace(artifact_path=engine)}, [1], options, reference,
                            SimpleNamespace(on_startup=None), SimpleNamespace(elapsed_s=lambda now: 0.0), lives)
    (plan,) = plans
    assert (plan.first_warmup_ms, plan.later_warmup_ms) == ((100.0, 30.0) if on_gpu else (500.0, 100.0))
    assert lives.overlap_exit is (memory_bytes >= 1000)


class SideBySideRunner(FakeGpuRunner):
    """FAKE runner whose first run (``prepare``) writes a line on fd 2, as ONNX Runtime's default logger does, and
    waits at ``barrier`` for the other arms' first runs: it returns only if they all run at the same time."""

    def __init__(self, name, barrier, line=None, fail=False):
        super().__init__(name)
        self.barrier, self.line, self.fail, self.prepared = barrier, line, fail, []

    def prepare(self, shapes):
        import os

        self.barrier.wait(timeout=10)  # every arm inside its first run at once, or BrokenBarrierError
        if self.line:
            os.write(2, f"{self.line}\n".encode())
        if self.fail:
            raise RuntimeError("CUDA failure 2: out of memory")
        self.prepared.append(shapes["x"])
        return {"y": shapes["x"]}


def test_first_runs_side_by_side_run_at_once_and_give_lines_to_the_arms_that_wrote_them_in_life_0():
    """The arms' first runs at a shape run in threads at the same time (the barrier passes only so). A line some arm
    wrote there in life 0 goes to those arms; a line no arm wrote there goes to every arm; each marked as written side
    by side. A runner's failure is raised once every thread has ended."""
    import threading

    from trtprof.measure.worker_loop import AS_IN_LIFE_0, NOT_TOLD_APART, first_runs_side_by_side

    barrier = threading.Barrier(3)
    runners = {"fp32": SideBySideRunner("fp32", barrier, "cudnn: no plan"),
               "tf32": SideBySideRunner("tf32", barrier),
               "fp16": SideBySideRunner("fp16", barrier, "new line")}
    lines = first_runs_side_by_side(runners, SHAPES[8], {"fp32": ["cudnn: no plan"], "tf32": ["cudnn: no plan"]})
    assert all(r.prepared == [(8, 4)] for r in runners.values())
    assert {k: sorted(v) for k, v in lines.items()} == {  # (in the order the threads wrote them)
        "fp32": ["cudnn: no plan" + AS_IN_LIFE_0, "new line" + NOT_TOLD_APART],
        "tf32": ["cudnn: no plan" + AS_IN_LIFE_0, "new line" + NOT_TOLD_APART], "fp16": ["new line" + NOT_TOLD_APART]}
    unknown = first_runs_side_by_side({"fp32": SideBySideRunner("fp32", threading.Barrier(1), "x")}, SHAPES[1], None)
    assert unknown == {"fp32": ["x" + NOT_TOLD_APART]}
    barrier = threading.Barrier(2)
    failing = {"fp32": SideBySideRunner("fp32", barrier, fail=True), "fp16": SideBySideRunner("fp16", barrier)}
    with pytest.raises(RuntimeError, match="out of memory"):
        first_runs_side_by_side(failing, SHAPES[1], None)
    assert failing["fp16"].prepared == [(1, 4)]  # the other thread ran to its end first


def test_a_side_by_side_priming_makes_each_batchs_first_runs_before_its_captures_and_keeps_the_lines(monkeypatch):
    """``prime(side_by_side=life 0's lines)``: at each batch size every arm's first run (in threads), then each arm's launch
    one at a time; the lines go to that batch's warm-up block and into the answer's ``lines``; the seconds name the
    side-by-side part. A thread's failure stops priming with its reason, as a launch's does."""
    import threading

    from trtprof.measure import interleave
    from trtprof.measure.worker_loop import AS_IN_LIFE_0

    state, calls = primed_state(monkeypatch)
    barrier = threading.Barrier(2)
    state.runners = {"fp32": SideBySideRunner("fp32", barrier, "cudnn: no plan"), "fp16": SideBySideRunner("fp16", barrier)}
    real_prime = timing.prime_launch

    def ordered(runner, feeds, config):  # each launch after both arms' first runs at its batch size
        assert all(feeds["x"].shape in [tuple(s) for s in r.prepared] for r in state.runners.values())
        real_prime(runner, feeds, config)

    monkeypatch.setattr(timing, "prime_launch", ordered)
    known = {1: {"fp32": ["cudnn: no plan"], "fp16": []}, 8: {"fp32": [], "fp16": ["cudnn: no plan"]}}
    kind, answer = state.prime(list(SHAPES.items()), 0, (0, 10), TimingConfig(), alone=True, side_by_side=known)
    assert kind == "ok" and answer["primed"] == [1, 8] and answer["side_by_side"] is True
    assert {"batch 1 side by side", "batch 8 side by side", "batch 1", "batch 8"} <= set(answer["seconds"])
    assert [c[:2] for c in calls] == [("fp32", (1, 4)), ("fp16", (1, 4)), ("fp32", (8, 4)), ("fp16", (8, 4))]
    assert answer["lines"][1]["fp32"][0] == "cudnn: no plan" + AS_IN_LIFE_0
    assert answer["lines"][8]["fp16"][0] == "cudnn: no plan" + AS_IN_LIFE_0
    assert not any("cudnn" in line for line in answer["lines"][8]["fp32"])  # life 0 saw fp16 write it at 8, not fp32
    monkeypatch.setattr(interleave, "measure_block", lambda r, f, c: Samples(
        stages={"latency_ms": np.ones(2)}, span_s=0.0, warmup_done=0, warmup_s=0.0, run_warnings=[]))
    state.set_feeds(SHAPES[1], 0, (0, 10), None)
    _, warm = state.warm(TimingConfig())
    assert "cudnn: no plan" + AS_IN_LIFE_0 in warm["fp32"].run_warnings
    assert not any("cudnn" in line for line in warm["fp16"].run_warnings)



def test_where_the_first_runs_side_by_side_fail_priming_goes_on_one_arm_at_a_time(monkeypatch):
    """A thread's failure is noted and the rest of the life primes one arm at a time (each launch makes its own first
    run): every batch size is still primed, none of them side by side after the failure, and the answer says it
    failed, so that later lives are not asked again."""
    import threading

    state, calls = primed_state(monkeypatch)
    barrier = threading.Barrier(2)
    state.runners = {"fp32": SideBySideRunner("fp32", barrier, fail=True), "fp16": SideBySideRunner("fp16", barrier)}
    _, answer = state.prime(list(SHAPES.items()), 0, (0, 10), TimingConfig(), alone=True, side_by_side={})
    assert answer["primed"] == [1, 8] and len(calls) == 4
    assert answer["notes"] == ["batch 1: first runs side by side failed (RuntimeError: CUDA failure 2: out of memory); "
                               "one arm at a time from here"]
    assert not any("side by side" in part for part in answer["seconds"])
    assert answer["side_by_side"] is True and answer["side_by_side_failed"] is True
    _, fine = primed_state(monkeypatch)[0].prime(list(SHAPES.items()), 0, (0, 10), TimingConfig(), alone=True)
    assert fine["side_by_side"] is False and fine["side_by_side_failed"] is False
