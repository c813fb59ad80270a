"""Does a GPU kernel use tensor cores? Read from its name, as Nsight users do.

cuDNN, cuBLAS, CUTLASS and TensorRT name their tensor-core kernels after the MMA instruction or
its shape: ``hmma``/``h884``/``h1688``/``h16816`` (FP16 MMA), ``s1688``/``s16816`` (TF32 on
Ampere+), ``tensorop`` (CUTLASS), ``wgmma``/``gmma`` (Hopper warpgroup MMA), ``xmma`` (cuDNN's
generic MMA kernels), ``tf32``; ``bf16``/``f16`` GEMM kernels from cuBLASLt (``sm90_xmma_gemm_f16f16…``).
CUDA-core kernels say ``ffma``/``sgemm``/``implicit_convolve_sgemm``/``winograd`` (FP32); cuDNN's
``convolve_common_engine_*`` and ``conv2d_grouped_direct_kernel`` and the layout/padding kernels
(``nchwToNhwc``, ``nhwcAddPadding``), memcpy and memset are not tensor-core work either. Names seen
on the H200 (torch 2.11, cuDNN 9): ``sm90_xmma_fprop_implicit_gemm_f16f16_…`` and
``cutlass_tensorop_f16_s16816fprop_…`` (tensor cores), ``sm80_xmma_fprop_implicit_gemm_…_ffma_…``
(CUDA cores), ``nvjet_sm90_hsh_…`` (cuBLASLt FP16 GEMM, not named by instruction: unknown).

Why only "True / False / None": a name that matches neither list is reported as unknown, never
guessed. xmma kernels that run FFMA (SIMT) carry ``ffma`` in the name and count as CUDA cores.
"""
from __future__ import annotations

import re

_TENSOR = re.compile(r"(hmma|h884|h1688|h16816|s1688|s16816|i8816|imma|tensorop|wgmma|gmma|xmma|_tf32|tf32_|"
                     r"bf16|f16f16|sm\d+_.*mma|cutlass.*_tc_|_tc_)")
_SIMT = re.compile(r"(ffma|sgemm|implicit_convolve|winograd|fft|direct_conv|direct_kernel|convolve_common_engine|"
                   r"depthwise|dwconv|elementwise|vectorized|reduce|copy|cast|pool|softmax|batch_norm|bn_fw|"
                   r"nchwtonhwc|nhwctonchw|addpadding|memcpy|memset)")


def uses_tensor_cores(name: str) -> bool | None:
    low = name.lower()
    if "ffma" in low:
        return False
    if _TENSOR.search(low):
        return True
    if _SIMT.search(low):
        return False
    return None
