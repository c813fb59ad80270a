"""compare --serial-loads: loads whose worker processes never live at the same time (measure.serial_loads)."""
from __future__ import annotations

import time

import numpy as np
import pytest
from scipy import stats as sps

from tests.fakes import simulate as cal
from trtprof.measure import interleave
from trtprof.measure.budget import BatchWindow
from trtprof.measure.interleave import LoadLost
from trtprof.measure.serial_loads import LifeCalls, LifePriming, LifeWorkers, TurnClocks, run_lives, run_serial
from trtprof.measure.timing import Samples, TimingConfig
from trtprof.stats.speedup import FASTER, SLOWER

NAMES = ("base", "cand")


class RecordingLoad:
    """Fake (named so): a load on a simulated clock that writes what is asked of it to ``log`` and refuses
    rounds once closed (the property the serial loop must keep)."""

    def __init__(self, index: int, clock: cal.SimClock, log: list, block_s: float, open_loads: set) -> None:
        self.index, self.clock, self.log, self.block_s, self.open_loads = index, clock, log, block_s, open_loads
        self.rng = np.random.default_rng(index)
        self.closed = False

    def block(self, config: TimingConfig) -> Samples:
        self.clock.t += self.block_s
        return Samples(stages={"latency_ms": np.exp(0.05 * self.rng.standard_normal(config.iterations))},
                       span_s=self.block_s, warmup_done=config.warmup, warmup_s=0.0)

    def warm_up(self, config: TimingConfig) -> dict[str, Samples]:
        return {n: self.block(config) for n in NAMES}

    def rounds(self, first: int, count: int, config: TimingConfig, order) -> list[dict[str, Samples]]:
        assert not self.closed, f"rounds asked of load {self.index} after it closed"
        self.log.append(("rounds", self.index, count))
        return [{n: self.block(config) for n in interleave.round_order(order, j)} for j in range(first, first + count)]

    def close(self) -> None:
        if not self.closed:
            self.log.append(("close", self.index))
            self.open_loads.discard(self.index)
        self.closed = True


def serial_run(budget_s: float, open_s: float = 0.5, grows: bool = False, refuses: bool = False):
    clock, log, open_loads = cal.SimClock(), [], set()

    def open_load(i: int) -> RecordingLoad:
        log.append(("open", i, sorted(open_loads)))  # which loads were still open when this one opened
        clock.t += open_s
        open_loads.add(i)
        return RecordingLoad(i, clock, log, 0.02, open_loads)

    plan = interleave.RoundPlan(time_budget_s=budget_s, round_iterations=20)
    window = BatchWindow(started=0.0, budget_s=budget_s, per_batch_s=budget_s, grows=grows, refuses=refuses)
    out = run_serial(NAMES, open_load, plan, clock=clock, window=window)
    return clock, out, log


def test_each_load_opens_only_after_every_earlier_one_closed_and_a_closed_load_gets_no_rounds():
    clock, out, log = serial_run(30.0)
    opens = [e for e in log if e[0] == "open"]
    assert len(opens) == out.loads >= interleave.MIN_LOADS
    assert all(still_open == [] for _, _, still_open in opens)  # nothing open beside a load being opened
    # per load: open, its rounds, close, and nothing of it after
    for i in range(out.loads):
        events = [k for k, e in enumerate(log) if e[1] == i]
        kinds = [log[k][0] for k in events]
        assert kinds[0] == "open" and kinds[-1] == "close" and set(kinds[1:-1]) == {"rounds"}
        assert events == list(range(events[0], events[-1] + 1))  # contiguous: no other load ran in between


def test_every_load_runs_the_minimum_rounds_where_the_budget_holds_them():
    clock, out, log = serial_run(30.0)
    per_load = {}
    for e in log:
        if e[0] == "rounds":
            per_load[e[1]] = per_load.get(e[1], 0) + e[2]
    assert set(per_load.values()) == {interleave.MIN_ROUNDS} and out.rounds == interleave.MIN_ROUNDS * out.loads
    assert clock.t <= 30.0 and not out.floor_overrun


def test_a_budget_below_the_floor_runs_two_loads_of_one_round_pair_and_says_it_overran():
    """Loads of 2 s in a 3-s budget: the floor (2 loads × 2 rounds) runs regardless, one load after the other,
    and the outcome says it ended past the budget; no third load."""
    clock, out, log = serial_run(3.0, open_s=2.0)
    assert out.loads == interleave.FLOOR_LOADS and out.rounds == interleave.FLOOR_LOADS * interleave.FLOOR_ROUNDS
    assert "the floor of 2 loads × 2 rounds needed" in out.floor_overrun and clock.t > 3.0


def test_a_given_budget_that_cannot_hold_the_minimum_is_refused_before_any_round():
    with pytest.raises(interleave.BudgetTooSmall):
        serial_run(5.0, open_s=2.0, refuses=True)


def test_a_default_budget_grows_to_the_minimum_s_loads_one_after_another():
    """The budget's growth (issue 42 #5) reckons the later loads one by one (``RoundLoop.minimum_needs_s``): with
    2-s loads a 5-s default grows, and the six loads run within what it grew to."""
    clock, out, log = serial_run(5.0, open_s=2.0, grows=True)
    assert out.budget_s > 5.0 and out.loads >= interleave.MIN_LOADS and clock.t <= out.budget_s * 1.1


# Runners of known truth through the serial loop (tests/fakes/simulate.py): its loads are not interleaved in
# time, so drift between loads falls into the load-to-load spread; the interval must still cover the truth and an
# A/A run must rarely be decisive.
SERIAL_REPLICATES = 120
SERIAL_CASES = ("stationary 10 %", "per-load offsets 3-8 %", "linear drift +2 %/s", "one-engine burst, 2 rounds")


def p_below(successes: int, n: int, figure: float) -> float:
    return float(sps.binomtest(successes, n, figure, alternative="less").pvalue)


@pytest.mark.slow
@pytest.mark.parametrize("min_rounds", [interleave.MIN_ROUNDS, interleave.FLOOR_ROUNDS])  # … one pair: long calls
@pytest.mark.parametrize("name", SERIAL_CASES)
def test_serial_loads_a_a_is_rarely_decisive_and_the_interval_covers_the_truth(name, min_rounds):
    case = cal.case_named(name)
    plan = interleave.RoundPlan(min_rounds=min_rounds)
    for ratio in (1.0, 1.05):
        truth = case.true_ratio(ratio)
        reps = [cal.run_replicate(case, ratio, 11 * 100_003 + k, plan, serial=True) for k in range(SERIAL_REPLICATES)]
        covered = sum(r.ci_low <= truth <= r.ci_high for r in reps)
        assert p_below(covered, SERIAL_REPLICATES, 0.94) > 0.01, (name, ratio, covered)
        if ratio == 1.0:
            quiet = sum(r.verdict not in (FASTER, SLOWER) for r in reps)
            assert p_below(quiet, SERIAL_REPLICATES, 0.95) > 0.01, (name, quiet)


class LifeWorld:
    """Fake (named so) of ``LifeWorkers`` on a simulated clock: the first batch size to open load ``i`` starts life
    ``i`` (``start_s``), a later one finds it alive (``open_s``); ``end_life`` ends it. Every call is logged with the
    life alive at the time; a load gives rounds only while its life is alive. ``cand_ms[k]``: the candidate's time
    at batch size ``k`` (the baseline's is 1 ms); ``lose``: (batch size, life) whose rounds fail as a lost worker."""

    def __init__(self, cand_ms, start_s=2.0, open_s=0.1, sigma=0.02, lose=None):
        self.clock, self.log, self.alive = cal.SimClock(), [], None
        self.cand_ms, self.start_s, self.open_s, self.sigma, self.lose = cand_ms, start_s, open_s, sigma, lose

    def opener(self, k):
        def open_load(i):
            self.log.append(("open", k, i, self.alive))
            if self.alive is None:
                self.alive = i
                self.clock.t += self.start_s
            self.clock.t += self.open_s
            return LifeLoad(self, k, i)
        return open_load

    def start_life(self, i):
        """``LifeCalls.start_life``: the life started before any load of it opens (its start then shared)."""
        self.log.append(("start", i, self.alive))
        if self.alive is None:
            self.alive = i
            self.clock.t += self.start_s

    def end_life(self):
        if self.alive is not None:
            self.log.append(("end", self.alive))
        self.alive = None


class LifeLoad:
    def __init__(self, world, k, i):
        self.world, self.k, self.i = world, k, i
        self.rng = np.random.default_rng(100 * k + i)

    def block(self, name, config):
        ms = 1.0 if name == "base" else self.world.cand_ms[self.k]
        self.world.clock.t += 0.002 * config.iterations * ms
        lat = ms * np.exp(self.world.sigma * self.rng.standard_normal(config.iterations))
        return Samples(stages={"latency_ms": lat}, span_s=0.0, warmup_done=config.warmup, warmup_s=0.0)

    def warm_up(self, config):
        return {n: self.block(n, config) for n in NAMES}

    def rounds(self, first, count, config, order):
        assert self.world.alive == self.i, f"rounds of load {self.i} asked while life {self.world.alive} is alive"
        if self.world.lose == (self.k, self.i):
            raise LoadLost(f"load {self.i} lost")
        self.world.log.append(("rounds", self.k, self.i, count))
        return [{n: self.block(n, config) for n in interleave.round_order(order, j)} for j in range(first, first + count)]

    def close(self):
        return None


def lives_run(world, batches=2, budget_s=30.0, refuses=False, shared=False):
    """``shared``: the lives started by ``LifeCalls.start_life`` (their start split over the loops), else by the first
    loop's open."""
    plan = interleave.RoundPlan(time_budget_s=budget_s, round_iterations=20)
    done = []
    world.begun = []

    def windows(k, start):
        return BatchWindow(started=start, budget_s=budget_s, per_batch_s=budget_s, refuses=refuses)

    outcomes = run_lives(NAMES, [world.opener(k) for k in range(batches)], plan, clock=world.clock, windows=windows,
                         calls=LifeCalls(world.end_life, lambda k, o: done.append(k), world.begun.append,
                                         world.start_life if shared else None))
    return outcomes, done


def test_each_life_serves_every_batch_size_in_turn_and_ends_before_the_next_starts():
    """Load i of both batch sizes is life i: batch 0 opens it (nothing alive then), batch 1 finds it alive, both run
    their rounds on it, and it ends before life i+1 opens; six lives, not twelve process starts."""
    world = LifeWorld(cand_ms=(0.5, 0.5))
    outcomes, done = lives_run(world)
    opens = [e for e in world.log if e[0] == "open"]
    assert all(o.loads >= interleave.MIN_LOADS for o in outcomes) and sorted(done) == [0, 1]
    lives = sorted({e[2] for e in opens})
    assert lives == list(range(len(lives))) and len([e for e in world.log if e[0] == "end"]) == len(lives)
    for i in lives:
        of_life = [k for k, e in enumerate(world.log) if (e[0] == "end" and e[1] == i) or (e[0] != "end" and e[2] == i)]
        assert of_life == list(range(of_life[0], of_life[-1] + 1))  # contiguous: nothing of another life between
        events = [world.log[k] for k in of_life]
        assert events[0] == ("open", 0, i, None) and events[-1] == ("end", i)
        assert [e[:3] for e in events if e[0] == "open"] == [("open", 0, i), ("open", 1, i)]
        assert all(e[3] == i for e in events if e[0] == "open" and e[1] == 1)  # batch 1 found the life alive


def test_each_batch_size_s_clock_counts_only_its_own_turns():
    """Batch 0 pays every life's 2-s start, batch 1 only its 0.1-s open: batch 1's loop spent far less than batch 0's,
    and the two together spent what the simulated clock ran (every second is some loop's turn)."""
    world = LifeWorld(cand_ms=(0.5, 0.5))
    outcomes, _ = lives_run(world)
    first, second = outcomes
    assert first.loads == second.loads
    assert first.elapsed_s > second.elapsed_s + (first.loads - 1) * 2.0 * 0.9
    assert first.elapsed_s + second.elapsed_s == pytest.approx(world.clock.t, rel=1e-9)


def test_a_life_started_before_its_loads_is_paid_by_every_batch_size_it_serves():
    """With ``start_life`` each life starts before any of its loads opens (both batch sizes find it alive), and its
    2-s start is split over the two clocks: each loop spent about what the other did (their rounds differ little),
    together what the simulated clock ran, and each counts its share in what a load costs it."""
    world = LifeWorld(cand_ms=(0.5, 0.5))
    outcomes, _ = lives_run(world, shared=True)
    first, second = outcomes
    assert first.loads == second.loads >= interleave.MIN_LOADS
    starts = [e for e in world.log if e[0] == "start"]
    assert [e[1:] for e in starts] == [(i, None) for i in range(first.loads)]
    assert all(e[3] == e[2] for e in world.log if e[0] == "open")  # every open found its life alive
    assert first.elapsed_s == pytest.approx(second.elapsed_s, rel=0.1)
    assert first.elapsed_s + second.elapsed_s == pytest.approx(world.clock.t, rel=1e-9)
    assert first.minimum is not None and first.minimum.first_load_s >= 1.0  # its 1-s share of life 0's start


def test_a_decided_batch_size_leaves_and_the_rest_go_on_in_later_lives_alone():
    """Batch 0 (2× faster, quiet) is decided at the minimum; batch 1 (A/A with 25 % load-to-load offsets) is not, and
    its later loads are lives of their own: batch 0 is announced first and opens nothing after it left."""
    world = LifeWorld(cand_ms=(0.5, 1.0))

    def offset_block(load, name, config, plain=LifeLoad.block):
        samples = plain(load, name, config)
        if load.k == 1 and name == "cand":
            samples.stages["latency_ms"] *= 1.0 + 0.25 * ((load.i * 7919) % 5 - 2) / 2
        return samples

    LifeLoad.block, plain = offset_block, LifeLoad.block
    try:
        outcomes, done = lives_run(world, budget_s=60.0)
    finally:
        LifeLoad.block = plain
    assert done == [0, 1] and outcomes[0].loads == interleave.MIN_LOADS < outcomes[1].loads
    later = [e for e in world.log if e[0] == "open" and e[2] >= interleave.MIN_LOADS]
    assert later and all(e[1] == 1 and e[3] is None for e in later)  # batch 1 alone starts each later life
    # each life was announced with the loops taking part (what a life's worker primes)
    assert world.begun == [[0, 1]] * interleave.MIN_LOADS + [[1]] * (outcomes[1].loads - interleave.MIN_LOADS)


def test_a_lost_worker_names_its_batch_size_and_keeps_that_loop_s_rounds():
    world = LifeWorld(cand_ms=(0.5, 0.5), lose=(1, 3))
    with pytest.raises(LoadLost) as caught:
        lives_run(world)
    assert caught.value.turn == 1 and caught.value.partial is not None and caught.value.partial.loads == 3


def test_a_given_budget_too_small_names_the_batch_size_that_found_it():
    world = LifeWorld(cand_ms=(0.5, 0.5), start_s=3.0)
    with pytest.raises(interleave.BudgetTooSmall) as caught:
        lives_run(world, budget_s=5.0, refuses=True)
    assert caught.value.turn == 0


def test_turn_clocks_stand_still_outside_their_turns():
    real = cal.SimClock()
    clocks = TurnClocks(real, 2)
    a, b = clocks.clock(0), clocks.clock(1)
    with clocks.turn(0):
        real.t += 1.0
        assert a() == 1.0 and b() == 0.0
    real.t += 5.0  # nobody's turn
    with clocks.turn(1):
        real.t += 2.0
    assert (a(), b()) == (1.0, 2.0)


def test_life_workers_serve_every_batch_size_in_one_process_and_end_it_before_the_next(fp32_record):
    """Real worker processes (ONNX Runtime on the CPU): load 0 at two batch sizes is one process; opening load 1
    ends it first (told to close, and waited for before load 1 is ready: exit code 0); load 1's process answers
    rounds; ending twice is harmless, and the ended life is waited for (``reap``)."""
    shapes = [(1, {"input": (1, 3, 16, 16)}), (2, {"input": (2, 3, 16, 16)})]
    lives = LifeWorkers({"fp32": fp32_record, "fp32#2": fp32_record},
                        priming=LifePriming(shapes, 0, (0, 100), TimingConfig(warmup=1, iterations=1)))
    try:
        lives.begin_life([1])
        assert lives.coming == [shapes[1]]
        lives.begin_life([0, 1])  # the life's worker is asked to prime both, and has answered before any load opens
        first = lives.load(0, {"input": (1, 3, 16, 16)}, 0, (0, 100))
        assert first.worker._priming_since is None
        again = lives.load(0, {"input": (2, 3, 16, 16)}, 0, (0, 100))
        assert again.worker is first.worker and first.worker.proc.poll() is None
        again.warm_up(TimingConfig(warmup=1, iterations=2))
        second = lives.load(1, {"input": (1, 3, 16, 16)}, 0, (0, 100))
        assert first.worker.proc.returncode == 0 and second.worker.proc.poll() is None
        second.warm_up(TimingConfig(warmup=1, iterations=2))
        rounds = second.rounds(0, 2, TimingConfig(warmup=0, iterations=3), ["fp32", "fp32#2"])
        assert [sorted(r) for r in rounds] == [["fp32", "fp32#2"]] * 2
        lives.end_life()
        lives.end_life()
        lives.reap()
        assert second.worker.proc.returncode == 0 and len(lives.started) == 2 and len(lives.lives) == 2
    finally:
        lives.kill()
        lives.close()


def test_life_workers_start_the_next_life_ahead_and_account_every_life(fp32_record):
    """``ahead``: once life 0 is ready to serve, life 1's process starts (imports only: told no engines) while life 0
    still lives; opening load 1 ends life 0, then tells that very process its engines (no new process); the spare
    started after life 1 and never used is killed at close and recorded as such. Each life's seconds are kept: a
    life started ahead waited only for its engines (no interpreter start in ``waited_s``); the record of work beside
    the timing shows the process started ahead overlapping life 0's timed rounds."""
    lives = LifeWorkers({"fp32": fp32_record, "fp32#2": fp32_record}, ahead=True)
    shapes = {"input": (1, 3, 16, 16)}
    try:
        first = lives.load(0, shapes, 0, (0, 100))
        spare = lives.spare
        assert spare is not None and spare.index == 1 and not spare._initialised and spare.proc.poll() is None
        first.warm_up(TimingConfig(warmup=1, iterations=2))
        first.rounds(0, 2, TimingConfig(warmup=0, iterations=3), ["fp32", "fp32#2"])
        time.sleep(3.0)  # the spare's imports done meanwhile, as during a GPU life's rounds (seconds)
        second = lives.load(1, shapes, 0, (0, 100))
        assert first.worker.proc.returncode == 0 and second.worker is spare and spare.proc.poll() is None
        assert lives.spare is not None and lives.spare is not spare  # life 2's, started ahead in its turn
        second.warm_up(TimingConfig(warmup=1, iterations=2))
        second.rounds(0, 2, TimingConfig(warmup=0, iterations=3), ["fp32", "fp32#2"])
        unused = lives.spare
    finally:
        lives.close()
    assert unused.proc.returncode is not None and len(lives.started) == 2
    one, two = lives.lives
    assert (one["life"], one["started_ahead"], two["life"], two["started_ahead"]) == (0, False, 1, True)
    # its interpreter had started and imported before it was asked: the run waited for its engines only
    assert two["waited_s"] < min(one["waited_s"], two["python_s"] + two["engines_s"])
    assert all(life["engines_s"] > 0 and life["exit_s"] >= 0 for life in (one, two))
    work = {w["what"]: w for w in lives.concurrent["work"]}
    assert work["life 1's process starting ahead (imports only)"]["overlap_s"] > 0
    assert "a process started ahead, not used" in work and lives.concurrent["timed_calls"] == 2


def test_life_0_is_the_process_started_with_the_command_for_lone_loads(fp32_record):
    """``workers.spares(lone=True)`` (compare with loads one at a time): one process starts with the command, importing
    while the engines are found, whatever the backend (ONNX Runtime has no libraries to preload); life 0 is that very
    process, told its engines, and its record says it started ahead. Without ``lone`` no spare starts for ONNX Runtime,
    and life 0 is a process of its own."""
    from trtprof.measure import workers

    for lone in (True, False):
        with workers.spares(0, ["onnxruntime"], lone=lone):
            waiting = list(workers.waiting_spares())
            assert len(waiting) == (1 if lone else 0)
            lives = LifeWorkers({"fp32": fp32_record})
            try:
                time.sleep(1.0 if lone else 0.0)  # (the engines' lookup in compare)
                load = lives.load(0, {"input": (1, 3, 16, 16)}, 0, (0, 100))
                assert (load.worker is waiting[0]) if lone else load.worker not in waiting
                assert load.worker.index == 0 and workers.waiting_spares() == []
                load.warm_up(TimingConfig(warmup=1, iterations=2))
            finally:
                lives.close()
        (life,) = lives.lives
        assert life["life"] == 0 and life["started_ahead"] is lone


def test_life_0_told_the_guessed_engines_ahead_is_kept_only_where_they_are_the_ones_found(fp32_record, conv_model,
                                                                                            tmp_path):
    """``workers.spares(lone=True, engines=...)``: life 0's process starts with the command and is told the engines
    compare guessed (``compare.records.likely_records``) at once. Where the lookup found those very files it is life 0
    (its record: ``engines_told_ahead``); where it found others (here: an entry rebuilt in place meanwhile, the same
    path and key but another file), it is killed and a fresh process loads the engines found."""
    import os

    from trtprof.measure import workers

    guessed = {"fp32": fp32_record, "fp32#2": fp32_record}
    with workers.spares(0, ["onnxruntime"], lone=True, engines=guessed):
        (told,) = workers.waiting_spares()
        lives = LifeWorkers(dict(guessed))
        try:
            load = lives.load(0, {"input": (1, 3, 16, 16)}, 0, (0, 100))
            assert load.worker is told
            load.warm_up(TimingConfig(warmup=1, iterations=2))
        finally:
            lives.close()
    (life,) = lives.lives
    assert life["started_ahead"] and life["engines_told_ahead"]

    with workers.spares(0, ["onnxruntime"], lone=True, engines=guessed):
        (told,) = workers.waiting_spares()
        artifact = fp32_record.artifact_path
        os.utime(artifact, ns=(artifact.stat().st_atime_ns, artifact.stat().st_mtime_ns + 10**9))  # "rebuilt"
        lives = LifeWorkers(dict(guessed))
        try:
            load = lives.load(0, {"input": (1, 3, 16, 16)}, 0, (0, 100))
            assert load.worker is not told and told.proc.poll() is not None  # the guess missed: killed
            load.warm_up(TimingConfig(warmup=1, iterations=2))
        finally:
            lives.close()
    (life,) = lives.lives
    assert not life["started_ahead"] and not life["engines_told_ahead"]


def test_the_engines_guessed_ahead_are_the_ones_built_from_these_bytes_and_unambiguous(fp32_record, conv_model):
    """``likely_records``: per precision the one engine of that backend built from the model's bytes, by arm label
    (A/A: the same engine twice), reading only the entries named after the model's file; no guess for ``auto``, another backend, a precision without such an engine, a
    folder that does not exist, or a file that is not ONNX."""
    import shutil

    from trtprof.compare.records import likely_records

    folder = fp32_record.artifact_path.parent
    # another model's entry (here unreadable) is not even read: only the entries named after this file are
    unreadable = folder / "other.fp32.onnxruntime.abcdefabcdef.json"
    unreadable.write_text("{not json")
    guess = likely_records(conv_model, ["fp32", "fp32"], folder, "onnxruntime")
    assert guess is not None and list(guess) == ["fp32", "fp32#2"]
    unreadable.unlink()
    assert all(r.artifact_path == fp32_record.artifact_path for r in guess.values())
    assert likely_records(conv_model, ["fp32", "fp16"], folder, "onnxruntime") is None
    assert likely_records(conv_model, ["fp32", "fp32"], folder, "auto") is None
    assert likely_records(conv_model, ["fp32", "fp32"], folder, "onnxruntime-cuda") is None
    assert likely_records(conv_model, ["fp32", "fp32"], folder / "nope", "onnxruntime") is None
    other = folder.parent / "copy.txt"
    shutil.copy(conv_model, other)
    assert likely_records(other, ["fp32", "fp32"], folder, "onnxruntime") is None
    twice = folder.parent / "twice"  # two fp32 engines of these bytes (another batch profile): which one is unknown
    shutil.copytree(folder, twice)
    for meta in list(twice.glob("*.json")):  # the same entry under another short key: stem.precision.backend.KEY
        shutil.copy(meta, meta.with_name(".".join([*meta.name.split(".")[:-2], "0123456789ab", "json"])))
    from trtprof.engines.cache import list_engines

    assert len([r for r in list_engines(twice) if r.precision == "fp32"]) == 2
    assert likely_records(conv_model, ["fp32", "fp32"], twice, "onnxruntime") is None


@pytest.mark.parametrize("later", [True, False])
def test_the_default_window_is_refitted_after_every_load_of_the_minimum(later, monkeypatch):
    """Lives that grow dearer after the second (1, 2, then 3.5 s each, as on the H200 where a life cost 5.5-8.3 s):
    the default window, refitted after each load of the minimum, grows with them (a line per refit) and the first
    batch size gets its six loads; refitted after the second load only (``refits_later`` off), it leaves the
    minimum unrun."""
    from trtprof.measure import serial_loads

    monkeypatch.setattr(serial_loads.SerialLoop, "refits_later", later)
    world = LifeWorld(cand_ms=(0.5, 0.5), start_s=0.0)
    costs = [1.0, 2.0] + [3.5] * 10
    plain = world.opener

    def opener(k):
        inner = plain(k)

        def open_load(i):
            if world.alive is None:
                world.clock.t += costs[i]
            return inner(i)
        return open_load

    world.opener = opener
    plan = interleave.RoundPlan(time_budget_s=12.0, round_iterations=20)
    notes: list[str] = []

    def windows(k, start):
        return BatchWindow(started=start, budget_s=12.0, per_batch_s=12.0, grows=True)

    outcomes = run_lives(NAMES, [world.opener(k) for k in range(2)], plan, clock=world.clock, windows=windows,
                         hooks=[interleave.LoopHooks(on_note=notes.append), interleave.LoopHooks()],
                         calls=LifeCalls(world.end_life))
    first = outcomes[0]
    if later:
        assert first.loads >= interleave.MIN_LOADS
        assert any(n.startswith("the third load took") for n in notes), notes
    else:
        assert first.loads < interleave.MIN_LOADS and not any("third" in n for n in notes)


class SteadyLoad(RecordingLoad):
    """Fake (named so): ``RecordingLoad`` whose every call takes ``call_ms`` or a hair more (never less)."""

    call_ms = 1.0

    def block(self, config: TimingConfig) -> Samples:
        self.clock.t += self.block_s
        lat = self.call_ms * (1 + 1e-4 * np.abs(self.rng.standard_normal(config.iterations)))
        return Samples(stages={"latency_ms": lat}, span_s=self.block_s, warmup_done=config.warmup, warmup_s=0.0)


@pytest.mark.parametrize("call_ms, expected", [(29.99, 4), (30.0, 2), (70.0, 2)])
def test_lone_loads_of_long_calls_run_one_round_pair_each(call_ms, expected):
    """Every arm's call at least ``ONE_PAIR_MS`` (just inside and just outside it): each lone load's minimum rounds are
    one pair, and the outcome records it; below it, ``MIN_ROUNDS``."""
    from trtprof.measure import serial_loads

    assert serial_loads.ONE_PAIR_MS == 30.0 and interleave.MIN_ROUNDS == 4
    clock, log, open_loads = cal.SimClock(), [], set()

    def open_load(i: int) -> RecordingLoad:
        clock.t += 0.5
        load = SteadyLoad(i, clock, log, 0.02, open_loads)
        load.call_ms = call_ms
        return load

    # a budget that holds the minimum's rounds of 20-call blocks (the plan reckons a round from the calls' times)
    plan = interleave.RoundPlan(time_budget_s=200.0, round_iterations=20)
    window = BatchWindow(started=0.0, budget_s=200.0, per_batch_s=200.0)
    out = run_serial(NAMES, open_load, plan, clock=clock, window=window)
    per_load: dict[int, int] = {}
    for e in log:
        if e[0] == "rounds":
            per_load[e[1]] = per_load.get(e[1], 0) + e[2]
    assert out.loads >= interleave.MIN_LOADS and set(per_load.values()) == {expected}
    assert out.min_rounds == expected


def test_a_plan_of_one_load_keeps_two_round_pairs_for_long_calls():
    """One load alone: its round pairs are the interval's units, so even long calls keep two pairs."""
    from trtprof.measure import serial_loads

    loop = serial_loads.SerialLoop(NAMES, lambda i: None, interleave.RoundPlan(min_loads=1), time.perf_counter,
                                   BatchWindow(started=0.0, budget_s=30.0, per_batch_s=30.0))
    assert loop.rounds_plan([70.0, 80.0]).min_rounds == 2 * interleave.FLOOR_ROUNDS
    loop6 = serial_loads.SerialLoop(NAMES, lambda i: None, interleave.RoundPlan(), time.perf_counter,
                                    BatchWindow(started=0.0, budget_s=30.0, per_batch_s=30.0))
    assert loop6.rounds_plan([70.0, 80.0]).min_rounds == interleave.FLOOR_ROUNDS
    assert loop6.rounds_plan([29.0, 80.0]).min_rounds == interleave.MIN_ROUNDS


class OrderWorker:
    """Fake (named so) of a life's ``Worker``: writes what is asked of it to ``events``, with its life's index."""

    def __init__(self, index, events):
        self.index, self.events = index, events
        self.proc = type("Proc", (), {"poll": staticmethod(lambda: None)})()
        self.marks, self.arms_s, self.prime_s, self.told_shared = {}, {}, {}, False
        self.spawned_at = self.ready_at = self.primed_at = self.closed_at = 0.0

    def init(self, records, autotune):
        self.events.append(f"life {self.index} told its engines")

    def wait_ready(self, who=None):
        self.events.append(f"life {self.index} ready")

    def ask_to_close(self):
        self.events.append(f"life {self.index} told to exit")

    def close(self):
        self.events.append(f"life {self.index} waited for")


@pytest.mark.parametrize("overlap", [True, False])
def test_the_next_life_loads_its_engines_while_the_last_one_exits_where_they_are_small(overlap):
    """``end_life`` tells the life to exit without waiting. With ``overlap_exit``: the next life's worker is told its
    engines, then the last one is waited for, then the new one (ready): the exit overlaps the engines' loading, never
    a round nor the new life's priming (after ``start``). Without (large engines): the last one is waited for first."""
    events: list[str] = []
    lives = LifeWorkers({})
    lives.overlap_exit = overlap
    lives.current, lives.spare = OrderWorker(0, events), OrderWorker(None, events)
    lives.end_life()
    assert events == ["life 0 told to exit"] and lives.lives == []
    assert lives.start(1) is lives.current and lives.current.index == 1
    told, waited = "life 1 told its engines", "life 0 waited for"
    assert events == ["life 0 told to exit", *([told, waited] if overlap else [waited, told]), "life 1 ready"]
    assert [(r["life"], r["exit_beside_next_load"]) for r in lives.lives] == [(0, overlap)]


@pytest.mark.parametrize("engine_bytes, memory_bytes, expected", [
    (100, 1000, True), (101, 1000, False), (None, 1000, False), (100, None, False), (0, 0, False)])
def test_an_exit_overlaps_the_next_load_only_for_engines_within_a_tenth_of_the_memory(engine_bytes, memory_bytes,
                                                                                      expected):
    from trtprof.measure import serial_loads

    assert serial_loads.OVERLAP_EXIT_SHARE == 0.1
    assert serial_loads.exit_may_overlap(engine_bytes, memory_bytes) is expected


def test_the_host_memory_is_what_a_cpu_life_loads_into():
    from trtprof.measure import serial_loads

    total = serial_loads.loading_memory_bytes(on_gpu=False)
    assert total is not None and total > 1 << 28
