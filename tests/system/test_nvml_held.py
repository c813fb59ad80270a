"""``nvml.held`` (a measurement worker's life): inside it, what cannot change (a GPU's handle, name, top clock,
slowdown temperature) is read once; what changes (clocks, temperature, power, energy, throttle reasons) is read at
every call, as outside it. Against a FAKE pynvml that counts its queries."""
from __future__ import annotations

import sys
import types
from collections import Counter

import pytest

from trtprof.system import nvml


class CountingPynvml(types.ModuleType):
    """FAKE pynvml: one GPU at PCI bus id 00000000:1A:00.0; counts every query by name."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 0, 1, 0, 1

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.count: Counter[str] = Counter()
        self.inits, self.clock = 0, 1980

    def _q(self, name, value):
        self.count[name] += 1
        return value

    def nvmlInit(self):  # noqa: N802 - pynvml's names
        self.inits += 1

    def nvmlShutdown(self):  # noqa: N802
        self.inits -= 1

    def nvmlDeviceGetHandleByPciBusId_v2(self, text):  # noqa: N802
        self.count["handle"] += 1
        if text != "00000000:1A:00.0":
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return "h"

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return self._q("handle", "h")

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return self._q("name", b"NVIDIA H200")

    def nvmlDeviceGetMaxClockInfo(self, h, which):  # noqa: N802
        return self._q("max_clock", 1980)

    def nvmlDeviceGetClockInfo(self, h, which):  # noqa: N802
        return self._q("clock", self.clock)

    def nvmlDeviceGetTemperature(self, h, which):  # noqa: N802
        return self._q("temperature", 40)

    def nvmlDeviceGetTemperatureThreshold(self, h, which):  # noqa: N802
        return self._q("threshold", 88)

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        return self._q("power", 90_000)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):  # noqa: N802
        return self._q("energy", 5)

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        return self._q("utilization", types.SimpleNamespace(gpu=0))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):  # noqa: N802
        return self._q("reasons", 0)

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        return self._q("pids", [])


@pytest.fixture
def fake(monkeypatch):
    fake = CountingPynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def blocks(n: int) -> list[dict]:
    """What a timing block reads: a watch around a before and an after (``timing.time_device``)."""
    states = []
    for _ in range(n):
        with nvml.watch_gpu(pci_bus_id="0000:1A:00.0", interval_s=60.0):
            states.append(nvml.gpu_state(pci_bus_id="0000:1A:00.0"))
            states.append(nvml.gpu_state(pci_bus_id="0000:1A:00.0"))
    return states


def test_a_held_session_reads_what_cannot_change_once_and_the_rest_every_time(fake):
    with nvml.held() as usable:
        assert usable
        held_states = blocks(3)
        fake.clock = 1500  # a clock that moves is read anew
        moved = nvml.gpu_state(pci_bus_id="0000:1A:00.0")
    held = Counter(fake.count)
    # the handle: the 4-digit domain missed once, then the 8-digit one found; both once for the whole session
    assert held["handle"] == 2 and held["name"] == 1 and held["max_clock"] == 1 and held["threshold"] == 1
    assert held["power"] == held["energy"] == 7 and held["clock"] >= 2 * 7 and moved["sm_clock_mhz"] == 1500
    assert all(s["name"] == "NVIDIA H200" and s["max_sm_clock_mhz"] == 1980 for s in held_states)
    fake.count.clear()
    fake.clock = 1980
    assert blocks(3) == held_states  # outside a held session: the same answers, each read every time
    assert fake.count["handle"] == 2 * 9 and fake.count["name"] == 6 and fake.count["threshold"] == 3
    assert fake.inits == 0 and nvml._HELD == {"depth": 0, "static": {}}  # ended: nothing kept


def test_nested_held_sessions_keep_what_they_read_until_the_outermost_ends(fake):
    with nvml.held():
        with nvml.held():
            nvml.gpu_state()
        nvml.gpu_state()
        assert fake.count["name"] == 1
    nvml.gpu_state()
    assert fake.count["name"] == 2


def test_without_nvml_a_held_session_is_unusable_and_keeps_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with nvml.held() as usable:
        assert usable is False and nvml.gpu_state() == {}
    assert nvml._HELD["depth"] == 0


def test_a_watch_with_states_reads_the_before_and_after_with_its_own_first_and_last_samples(fake):
    """``watch_gpu(states=True)`` (a timing block): its first and last samples are full ``gpu_state`` reads, taken
    out with ``pop_states``; the summary is what a plain watch gives. Against a plain watch with a ``gpu_state``
    beside each end, it saves the three queries both make at each end (throttle reasons, SM clock, temperature)."""
    bus = "0000:1A:00.0"
    with nvml.held():
        with nvml.watch_gpu(pci_bus_id=bus, interval_s=60.0, states=True) as merged:
            fake.clock = 1500  # moved between the first and the last read
        once = Counter(fake.count)
        fake.count.clear()
        fake.clock = 1980
        with nvml.watch_gpu(pci_bus_id=bus, interval_s=60.0) as plain:
            before = nvml.gpu_state(pci_bus_id=bus)
            fake.clock = 1500
            after = nvml.gpu_state(pci_bus_id=bus)
        beside = Counter(fake.count)
    first, last = nvml.pop_states(merged)
    assert "states" not in merged and merged == plain  # the same summary: 2 samples, the clock's range, no throttle
    assert first == before and last == after and first["sm_clock_mhz"] == 1980 and last["sm_clock_mhz"] == 1500
    saved = {k: beside[k] - once[k] for k in beside}
    assert {k: v for k, v in saved.items() if v} == {"reasons": 2, "clock": 2, "temperature": 2}


def test_a_watch_with_states_without_a_full_read_still_samples_and_gives_empty_states(monkeypatch):
    """An NVML whose full read fails (a FAKE without the name query) leaves the states empty, as ``gpu_state`` is
    then, and the watch's own samples stand; without NVML at all, both are empty."""
    from tests.system.test_validity import FakePynvml

    monkeypatch.setitem(sys.modules, "pynvml", FakePynvml())
    with nvml.watch_gpu(interval_s=60.0, states=True) as summary:
        pass
    assert nvml.pop_states(summary) == ({}, {}) and summary["samples"] == 2
    assert nvml.gpu_state() == {}
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with nvml.watch_gpu(states=True) as nothing:
        pass
    assert nothing == {} and nvml.pop_states(nothing) == ({}, {})
