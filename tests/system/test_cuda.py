"""trtprof.system.cuda and trtprof.system.nvml: import and degrade cleanly without a driver; on a GPU, buffers
round-trip and events time a kernel whose duration is fixed by the GPU's global timer."""
from __future__ import annotations

import numpy as np
import pytest

from trtprof.system import cuda, nvml
from trtprof.errors import CudaError, TrtprofError

rt = pytest.importorskip("cuda.bindings.runtime")

needs_gpu = pytest.mark.skipif(cuda.device_count() == 0, reason="no CUDA device")
no_gpu = pytest.mark.skipif(cuda.device_count() > 0, reason="checks the no-driver path")


def test_device_count_agrees_with_the_runtime():
    err, count = rt.cudaGetDeviceCount()
    expected = int(count) if err == rt.cudaError_t.cudaSuccess else 0
    assert cuda.device_count() == expected


def test_check_unwraps_values_and_names_errors():
    assert cuda.check((rt.cudaError_t.cudaSuccess,)) is None
    assert cuda.check((rt.cudaError_t.cudaSuccess, 7)) == 7
    assert cuda.check((rt.cudaError_t.cudaSuccess, 1, 2)) == (1, 2)
    with pytest.raises(CudaError, match="cudaMalloc failed: cudaErrorMemoryAllocation") as info:
        cuda.check((rt.cudaError_t.cudaErrorMemoryAllocation, None), "cudaMalloc")
    assert isinstance(info.value, TrtprofError)  # the CLI turns it into exit 2 + one line


@no_gpu
def test_without_a_driver_resources_raise_cuda_errors_not_crashes():
    for make in (cuda.Stream, cuda.Event, lambda: cuda.DeviceBuffer(16), lambda: cuda.PinnedHostBuffer(16)):
        with pytest.raises(CudaError, match="cudaError"):
            make()


@no_gpu
def test_nvml_degrades_to_empty_without_a_gpu():
    assert nvml.describe_gpus() == []
    assert nvml.gpu_state() == {}


def test_nvml_reason_names():
    assert nvml.decode_reasons(0) == []
    assert nvml.decode_reasons(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert nvml.decode_reasons(0x10000) == ["0x10000"]


@pytest.mark.gpu
@needs_gpu
def test_pinned_and_device_buffers_round_trip():
    data = np.random.default_rng().standard_normal((3, 257), dtype=np.float32)
    with cuda.Stream() as stream, cuda.PinnedHostBuffer(data.nbytes) as src, \
            cuda.PinnedHostBuffer(data.nbytes) as dst, cuda.DeviceBuffer(data.nbytes) as dev:
        a, b = src.array(data.shape, data.dtype), dst.array(data.shape, data.dtype)
        a[...] = data
        b[...] = np.nan  # poisoned: every element must be written back
        cuda.memcpy_htod_async(dev.ptr, a, stream)
        cuda.memcpy_dtoh_async(b, dev.ptr, stream)
        stream.synchronize()
        np.testing.assert_array_equal(b, data)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("blocking", [True, False])
def test_events_time_a_globaltimer_kernel_no_shorter_than_its_duration(blocking):
    """A kernel that spins until the GPU's global (wall) timer advanced by N ns cannot finish
    sooner, whatever the clocks: a lower bound that holds exactly, not a timing threshold."""
    from tests.gpu_kernels import spin_kernel

    launch = spin_kernel()
    wanted_ms = 0.5
    with cuda.Stream() as stream, cuda.Event(blocking) as start, cuda.Event(blocking) as end:
        start.record(stream)
        launch(stream.handle, int(wanted_ms * 1e6))
        end.record(stream)
        end.synchronize()
        assert end.query()
        assert start.elapsed_ms(end) >= wanted_ms * 0.999  # event resolution is ~0.5 us


@pytest.mark.gpu
@needs_gpu
def test_nvml_describes_the_gpu_cuda_uses():
    gpus = nvml.describe_gpus()
    assert gpus and gpus[0]["name"]
    state = nvml.gpu_state(pci_bus_id=cuda.pci_bus_id(0))
    assert state["name"] == cuda.device_name(0) or cuda.device_name(0) in state["name"]
    assert state["sm_clock_mhz"] > 0


@pytest.mark.gpu
@needs_gpu
def test_graph_capture_replays_the_captured_work():
    data = np.arange(64, dtype=np.float32)
    with cuda.Stream() as stream, cuda.PinnedHostBuffer(data.nbytes) as host, \
            cuda.DeviceBuffer(data.nbytes) as a, cuda.DeviceBuffer(data.nbytes) as b:
        view = host.array(data.shape, data.dtype)
        view[...] = data
        cuda.memcpy_htod_async(a.ptr, view, stream)
        stream.synchronize()

        def d2d():
            cuda.check(rt.cudaMemcpyAsync(b.ptr, a.ptr, data.nbytes, rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice,
                                          stream.raw))

        with cuda.Graph(d2d, stream) as graph:
            view[...] = -1
            graph.launch()
            cuda.memcpy_dtoh_async(view, b.ptr, stream)
            stream.synchronize()
        np.testing.assert_array_equal(view, data)
