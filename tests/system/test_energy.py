"""Energy per inference (issue 24): NVML's counter difference, its cross-check against sampled power,
and "n/a" with the reason where there is no counter. NVML is replaced by a FAKE reader whose counter
and power are known, so every expected number is exact."""
from __future__ import annotations

import pytest

from trtprof.system import energy


class FakeReader:
    """FAKE NVML: a counter in mJ the test sets, a constant power."""

    def __init__(self, watts: float = 300.0) -> None:
        self.mj = 1_000_000
        self.watts = watts
        self.closed = False

    def energy_mj(self) -> int:
        return self.mj

    def power_w(self) -> float:
        return self.watts

    def close(self) -> None:
        self.closed = True


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_meter_reports_joules_power_and_joules_per_inference():
    reader, clock = FakeReader(300.0), FakeClock()
    meter = energy.EnergyMeter(reader, clock=clock, sample_ms=1)
    meter.start()
    reader.mj += 600_000  # 600 J …
    clock.t += 2.0  # … in 2 s: 300 W, as sampled
    out = meter.stop(inferences=1200)
    meter.close()
    assert out["status"] == "ok" and out["joules"] == pytest.approx(600.0) and out["seconds"] == pytest.approx(2.0)
    assert out["avg_power_w"] == pytest.approx(300.0) and out["joules_per_inference"] == pytest.approx(0.5)
    assert out["sampled_power_w"] == pytest.approx(300.0) and out["agreement"] == pytest.approx(1.0)
    assert "note" not in out and reader.closed


@pytest.mark.parametrize("off, noted", [(energy.AGREEMENT_TOLERANCE * 0.9, False),
                                        (energy.AGREEMENT_TOLERANCE * 1.1, True)])
def test_counter_and_sampled_power_disagreeing_beyond_the_tolerance_is_noted(off, noted):
    out = energy.summarize(100.0 * (1 + off), 1.0, [100.0, 100.0], inferences=None)
    assert ("note" in out) is noted and "joules_per_inference" not in out


def test_no_counter_is_n_a_with_the_reason_never_zero():
    meter = energy.EnergyMeter("this GPU/driver has no total-energy counter")
    meter.start()
    out = meter.stop(inferences=10)
    assert out == {"status": "n/a", "reason": "this GPU/driver has no total-energy counter"}
    assert energy.from_states({}, {}, 1.0, 10) == {"status": "n/a", "reason": "no NVML GPU state"}
    assert energy.from_states({"power_w": 1.0}, {"power_w": 1.0}, 1.0, 10)["reason"] == \
        "this GPU/driver has no total-energy counter"


def test_nvml_reader_without_a_driver_says_why():
    reader = energy.NvmlReader.open()
    if not isinstance(reader, str):
        reader.close()
        pytest.skip("this machine has an NVML GPU")
    assert reader  # a sentence, e.g. "NVML is not usable here (NVMLError_LibraryNotFound)"


def test_from_states_uses_the_counter_across_the_timed_loop():
    out = energy.from_states({"total_energy_mj": 5_000, "power_w": 100.0}, {"total_energy_mj": 55_000, "power_w": 100.0},
                             0.5, 1000)
    assert out["joules"] == pytest.approx(50.0) and out["joules_per_inference"] == pytest.approx(0.05)
    assert out["agreement"] == pytest.approx(1.0) and "two readings" in out["method"]


def test_combine_adds_windows_up():
    a = energy.summarize(10.0, 1.0, [10.0], inferences=100)
    b = energy.summarize(30.0, 1.0, [30.0], inferences=100)
    out = energy.combine([a, b])
    assert out["joules"] == 40.0 and out["seconds"] == 2.0 and out["joules_per_inference"] == pytest.approx(0.2)
    assert out["agreement"] == pytest.approx(1.0) and out["windows"] == 2
    assert energy.combine([energy.not_available("x")]) == {"status": "n/a", "reason": "x"}


def test_the_driver_reads_the_counter_at_the_window_edge_and_divides_by_its_inferences():
    """run_window takes the meter's joules and divides them by the window's inferences (requests × batch)."""
    from contextlib import nullcontext

    from trtprof.serving.driver import ServingConfig, run_window

    class CountingMeter:
        def __init__(self):
            self.requests = 0

        def start(self):
            pass

        def stop(self):
            return energy.summarize(2.0, 1.0, [2.0], inferences=None)

    meter = CountingMeter()

    def request():
        meter.requests += 1

    w = run_window([lambda: nullcontext(request)], ServingConfig(warmup_s=0.0, window_s=0.2, min_requests=3),
                   meter=meter, batch_size=4)
    assert w.energy["inferences"] == 4 * w.requests and w.energy["joules_per_inference"] == 2.0 / (4 * w.requests)
    assert energy.per_inference(energy.not_available("x"), 10) == {"status": "n/a", "reason": "x"}


class FakePynvml:
    """FAKE pynvml: an instantaneous-power field (NVML_FI_DEV_POWER_INSTANT) that the driver may lack,
    and nvmlDeviceGetPowerUsage, the 1-s average, in milliwatts."""

    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_VALUE_TYPE_UNSIGNED_INT = 1

    def __init__(self, instant_mw: int | None, average_mw: int = 200_000) -> None:
        self.instant_mw, self.average_mw = instant_mw, average_mw
        self.field_calls = 0
        self.value_type = 1

    def nvmlDeviceGetFieldValues(self, handle, fields):  # noqa: N802 - pynvml's name
        from types import SimpleNamespace

        assert fields == [186]
        self.field_calls += 1
        ok = self.instant_mw is not None
        return [SimpleNamespace(nvmlReturn=0 if ok else 3, valueType=self.value_type,
                                value=SimpleNamespace(uiVal=self.instant_mw or 0))]

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        return self.average_mw


def test_reader_samples_instantaneous_power_where_the_driver_has_it():
    nv = FakePynvml(instant_mw=350_000)
    reader = energy.NvmlReader(nv, handle=object())
    assert reader.power_source is None  # not read yet
    assert reader.power_w() == 350.0 and reader.power_source == energy.INSTANT


def test_reader_falls_back_to_the_averaged_power_and_stops_asking():
    nv = FakePynvml(instant_mw=None)  # nvmlReturn 3: NVML_ERROR_NOT_SUPPORTED
    reader = energy.NvmlReader(nv, handle=object())
    assert reader.power_w() == 200.0 and reader.power_source == energy.AVERAGED
    assert reader.power_w() == 200.0 and nv.field_calls == 1


def test_once_instantaneous_a_failed_reading_is_a_missing_sample_not_a_switch():
    nv = FakePynvml(instant_mw=350_000)
    reader = energy.NvmlReader(nv, handle=object())
    assert reader.power_w() == 350.0
    nv.instant_mw = None  # one transient failure
    assert reader.power_w() is None and reader.power_source == energy.INSTANT
    nv.instant_mw = 360_000
    assert reader.power_w() == 360.0


def test_a_field_of_another_value_type_is_not_read_as_milliwatts():
    nv = FakePynvml(instant_mw=350_000)
    nv.value_type = 0  # NVML_VALUE_TYPE_DOUBLE
    reader = energy.NvmlReader(nv, handle=object())
    assert reader.power_w() == 200.0 and reader.power_source == energy.AVERAGED


def test_the_window_records_which_power_the_cross_check_sampled():
    class InstantFake(FakeReader):
        power_source = energy.INSTANT

    reader, clock = InstantFake(300.0), FakeClock()
    meter = energy.EnergyMeter(reader, clock=clock, sample_ms=1)
    meter.start()
    reader.mj += 150_000
    clock.t += 0.5
    out = meter.stop(inferences=10)
    assert out["power_source"] == energy.INSTANT
    plain, clock2 = FakeReader(300.0), FakeClock()
    meter2 = energy.EnergyMeter(plain, clock=clock2, sample_ms=1)
    meter2.start()
    plain.mj += 150_000
    clock2.t += 0.5
    assert "power_source" not in meter2.stop(inferences=10)  # a reader that does not say: nothing claimed
    assert energy.combine([out, dict(out)])["power_source"] == energy.INSTANT
