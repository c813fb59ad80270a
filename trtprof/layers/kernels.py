"""Does a GPU kernel use tensor cores? Read from its name, as Nsight users do.

cuDNN, cuBLAS, CUTLASS and TensorRT name their tensor-core kernels after the MMA instruction or
its shape: ``hmma``/``h884``/``h1688``/``h16816`` (FP16 MMA), ``s1688``/``s16816`` (TF32 on
Ampere+), ``tensorop`` (CUTLASS), ``wgmma``/``gmma`` (Hopper warpgroup MMA), ``xmma`` (cuDNN's
generic MMA kernels), ``tf32``; ``bf16``/``f16`` GEMM kernels from cuBLASLt (``sm90_xmma_gemm_f16f16…``).
CUDA-core kernels say ``ffma``/``sgemm``/``implicit_convolve_sgemm``/``winograd`` (FP32) or nothing.

Why only "True / False / None": a name that matches neither list is reported as unknown, never
guessed. xmma kernels that run FFMA (SIMT) carry ``ffma`` in the name and count as CUDA cores.
"""
from __future__ import annotations

import re

_TENSOR = re.compile(r"(hmma|h884|h1688|h16816|s1688|s16816|i8816|imma|tensorop|wgmma|gmma|xmma|_tf32|tf32_|"
                     r"bf16|f16f16|sm\d+_.*mma|cutlass.*_tc_|_tc_)")
_SIMT = re.compile(r"(ffma|sgemm|implicit_convolve|winograd|fft|direct_conv|depthwise|dwconv|elementwise|"
                   r"vectorized|reduce|copy|cast|pool|softmax|batch_norm|bn_fw)")


def uses_tensor_cores(name: str) -> bool | None:
    low = name.lower()
    if "ffma" in low:
        return False
    if _TENSOR.search(low):
        return True
    if _SIMT.search(low):
        return False
    return None
