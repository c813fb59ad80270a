"""preflight's one out-of-memory classifier (``is_out_of_memory``): every kind of error it accepts,
each next to the nearest error it must refuse, and a caller (``bench_one``) turning a cuDNN
ALLOC_FAILED from a run into the one-line OutOfMemory error."""
from __future__ import annotations

import pytest

from trtprof.system import preflight


class OutOfMemoryError(RuntimeError):
    """A fake named as torch's (``torch.cuda.OutOfMemoryError``): the classifier matches the type name."""


class SubclassedOom(OutOfMemoryError):
    """A subclass of a type named OutOfMemoryError (matched through the type's MRO)."""


class NotOutOfMemoryError(RuntimeError):
    pass


@pytest.mark.parametrize("err", [
    MemoryError("Unable to allocate 8.00 GiB for an array"),
    OutOfMemoryError("no message the libraries would print"),
    SubclassedOom(""),
    RuntimeError("CUDNN_STATUS_ALLOC_FAILED"),
    RuntimeError("cuBLAS error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)"),
    RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Failed to allocate memory for requested buffer"),
    RuntimeError("std::bad_alloc"),
    RuntimeError("CUDA_ERROR_OUT_OF_MEMORY"),
    RuntimeError("cudaErrorMemoryAllocation"),
    ValueError("out of memory"),  # the message decides whatever the type (ORT raises its own types)
], ids=repr)
def test_an_out_of_memory_error_is_recognised(err):
    assert preflight.is_out_of_memory(err)


@pytest.mark.parametrize("err", [
    RuntimeError("CUDNN_STATUS_BAD_PARAM"),
    RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED"),
    NotOutOfMemoryError("CUDA error: an illegal memory access was encountered"),
    ValueError("memory"),
    RuntimeError("Failed to allocate"),  # ORT's message names memory: a partial phrase is not enough
    Exception(""),
], ids=repr)
def test_any_other_error_is_not(err):
    assert not preflight.is_out_of_memory(err)


def test_torch_out_of_memory_error_is_recognised_without_torch_in_the_classifier():
    torch = pytest.importorskip("torch")
    assert preflight.is_out_of_memory(torch.cuda.OutOfMemoryError(""))  # empty message: the type decides


def test_the_memory_refusal_writes_sizes_as_memory_fmt_size_does():
    """One formatter for sizes in sentences (``memory.fmt_size``): MiB under 1 GiB (it said "0.5 GiB"
    from 0.1 GiB up), GiB from 1 GiB, whole GiB with separators when large."""
    from trtprof.errors import OutOfMemory

    with pytest.raises(OutOfMemory, match=r"needs 512 MiB for its inputs alone, 256 MiB of memory is available"):
        preflight.check_memory(8, 512 << 20, available=256 << 20)
    with pytest.raises(OutOfMemory, match=r"needs 2,048 GiB for its inputs alone, 1 GiB of memory is available"):
        preflight.check_memory(8, 2048 << 30, available=1 << 30)
    preflight.check_memory(8, 1 << 30, available=1 << 30)  # just fits: no error
