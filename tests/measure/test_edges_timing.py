"""The measurement warnings' thresholds (timing.device_notes, noise.cpu_noise_warning, the outlier
count of stats) tested just inside and just outside. All pure functions of crafted samples."""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.system import noise
from trtprof.stats import latency as stats
from trtprof.measure import timing
from trtprof.measure.timing import TimingConfig


def with_cv(cv: float, n: int = 1001, mean: float = 1.0) -> np.ndarray:
    """Samples of exactly this coefficient of variation (std with ddof=1 over mean)."""
    z = np.linspace(-1.0, 1.0, n)
    z = (z - z.mean()) / z.std(ddof=1)
    return mean * (1.0 + cv * z)


def gpu_stages(compute_cv: float = 0.0, enqueue: float = 0.1, h2d: float = 0.1, d2h: float = 0.1) -> dict:
    compute = with_cv(compute_cv)
    return {"compute_ms": compute, "enqueue_ms": np.full(compute.size, enqueue),
            "h2d_ms": np.full(compute.size, h2d), "d2h_ms": np.full(compute.size, d2h)}


def notes(stages, before=None, after=None, config=None) -> list[str]:
    return timing.device_notes(stages, before or {}, after or {}, config or TimingConfig())


def test_compute_cv_warning_from_just_above_2_5_percent():
    assert timing.COMPUTE_CV_WARN == 0.025
    assert any("CV is 2.6%" in n for n in notes(gpu_stages(0.026)))
    assert notes(gpu_stages(0.024)) == []
    assert notes(gpu_stages(0.0)) == []


def test_clock_moved_from_just_above_five_percent():
    assert timing.CLOCK_MOVED_FRACTION == 0.05
    moved = notes(gpu_stages(), {"sm_clock_mhz": 1000}, {"sm_clock_mhz": 949})
    assert any("SM clock moved from 1000 to 949 MHz" in n for n in moved)
    assert notes(gpu_stages(), {"sm_clock_mhz": 1000}, {"sm_clock_mhz": 951}) == []
    assert notes(gpu_stages(), {"sm_clock_mhz": 1000}, {"sm_clock_mhz": 950}) == []  # exactly 5 %: not moved
    assert notes(gpu_stages(), {"sm_clock_mhz": 951}, {"sm_clock_mhz": 1000}) == []  # either direction


def test_enqueue_bound_from_nine_tenths_of_compute_on():
    assert timing.ENQUEUE_BOUND_RATIO == 0.9
    assert any(n.startswith("enqueue-bound") for n in notes(gpu_stages(enqueue=0.90)))
    assert any("--cuda-graph" in n for n in notes(gpu_stages(enqueue=0.91)))
    assert not any("--cuda-graph" in n for n in notes(gpu_stages(enqueue=0.91), config=TimingConfig(cuda_graph=True)))
    assert notes(gpu_stages(enqueue=0.89)) == []


def test_transfer_bound_only_above_compute_and_only_with_copies():
    assert any(n.startswith("transfer-bound") for n in notes(gpu_stages(h2d=0.5, d2h=0.51)))
    assert notes(gpu_stages(h2d=0.5, d2h=0.5)) == []  # equal: not above
    assert notes(gpu_stages(h2d=0.5, d2h=0.51), config=TimingConfig(copies=False)) == []


def test_throttle_reasons_other_than_the_benign_ones_are_noted():
    assert notes(gpu_stages(), after={"throttle_reasons": ["gpu_idle", "applications_clocks_setting"]}) == []
    [note] = notes(gpu_stages(), after={"throttle_reasons": ["gpu_idle", "sw_power_cap"]})
    assert note == "GPU clocks were limited at the end of the run (sw_power_cap)"


def test_cpu_noise_warning_strictly_above_ten_percent():
    assert noise.CPU_CV_WARN == 0.10
    quiet = {"usable_cores": 4, "load_average": [0.0], "governor": "performance"}
    assert noise.cpu_noise_warning(0.10, threads=1, duration_s=10, state=quiet) is None
    assert noise.cpu_noise_warning(0.099, threads=1, duration_s=10, state=quiet) is None
    warning = noise.cpu_noise_warning(0.101, threads=1, duration_s=10, state=quiet)
    assert warning == "latency CV is 10.1% (> 10%): the CPU numbers are noisy"


def test_cpu_noise_advice_at_its_edges():
    def advice(**state):
        base = {"usable_cores": 4, "load_average": [0.0], "governor": "performance"}
        return noise.cpu_noise_warning(0.2, threads=1, duration_s=10, state={**base, **state})

    assert "machine is busy" in advice(load_average=[2.1]) and "machine is busy" not in advice(load_average=[2.0])
    assert "governor is 'powersave'" in advice(governor="powersave") and "governor" not in advice()
    assert "--threads 2" in noise.cpu_noise_warning(0.2, threads=None, duration_s=10, state={"usable_cores": 4})
    longer = "measure longer"
    assert longer in noise.cpu_noise_warning(0.2, threads=1, duration_s=9.9, state={"usable_cores": 4})
    assert longer not in noise.cpu_noise_warning(0.2, threads=1, duration_s=10, state={"usable_cores": 4})


def test_an_outlier_is_more_than_five_robust_sigma_from_the_median():
    assert stats.OUTLIER_MADS == 5.0
    body = np.array([-1.0, -1.0, 0.0, 1.0, 1.0] * 20) + 10.0  # median 10, MAD 1, robust σ 1.4826
    edge = 10.0 + 5 * 1.4826
    s = stats.LatencyStats.from_samples(np.concatenate([body, [edge * 0.999 + 0.001 * 10, edge * 1.001]]))
    assert s.outliers == 1
    assert stats.LatencyStats.from_samples(body).outliers == 0
    assert stats.LatencyStats.from_samples(np.full(10, 3.0)).outliers == 0  # no spread: no outlier claim


def test_cv_is_std_with_ddof_1_over_the_mean():
    s = stats.LatencyStats.from_samples([1.0, 2.0, 3.0])
    assert s.cv == pytest.approx(1.0 / 2.0) and s.std == pytest.approx(1.0)
