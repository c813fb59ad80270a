"""Which ONNX Runtime distribution trtprof requires is chosen here, once: ``onnxruntime`` (the CPU build,
the embedded default) or, with ``TRTPROF_ORT=cuda`` in the environment, ``onnxruntime-gpu`` (its CUDA
execution provider: ``--backend onnxruntime-cuda``). Both provide the same ``onnxruntime`` module and must
never be installed together (whichever was installed last owns the files), so the choice is not an extra:
an extra can only add a package, never replace the CPU one. docs/ort-cuda.md gives the install line."""
import os

from setuptools import setup
from setuptools.config.setupcfg import read_configuration

ORT_REQUIREMENT = {"cpu": "onnxruntime>=1.17", "cuda": "onnxruntime-gpu>=1.27"}
choice = os.environ.get("TRTPROF_ORT", "cpu").strip().lower() or "cpu"
if choice not in ORT_REQUIREMENT:
    raise SystemExit(f"TRTPROF_ORT={choice!r}: choose cpu (onnxruntime) or cuda (onnxruntime-gpu)")
base = read_configuration(os.path.join(os.path.dirname(os.path.abspath(__file__)), "setup.cfg"))
setup(install_requires=[*base["options"]["install_requires"], ORT_REQUIREMENT[choice]])
