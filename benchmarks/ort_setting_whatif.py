"""trtprof with one of its module constants set otherwise, to measure what the constant's default changes (issue 42).
A PROTOTYPE, not a trtprof option: this process sets ``MODULE.NAME`` to the literal given, then runs trtprof's command
line with the rest of the arguments; the workers it starts read what it sends them, and the constants they read
themselves keep their defaults. Run it beside an unchanged compare and the independent loop
(``ort_cuda_fidelity.sh`` stage ``sidebyside``): a default is only worth having where the wall time falls and the
per-arm medians against ``reference_ort_iobinding.py``, the verdicts and GPU A/A do not move.

    python3 benchmarks/ort_setting_whatif.py trtprof.measure.serial_loads.PRIME_SIDE_BY_SIDE=False \
        compare MODEL.onnx --backend onnxruntime-cuda …

Prints the setting, then what trtprof prints.
"""
from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    if len(sys.argv) < 3 or "=" not in sys.argv[1]:
        raise SystemExit(__doc__)
    where, literal = sys.argv[1].split("=", 1)
    module_name, name = where.rsplit(".", 1)
    module = importlib.import_module(module_name)
    if not hasattr(module, name):
        raise SystemExit(f"{module_name} has no {name}")
    default, value = getattr(module, name), ast.literal_eval(literal)
    setattr(module, name, value)
    print(f"this run: {where} = {value!r} (trtprof's: {default!r})", flush=True)
    from trtprof.cli import main as trtprof_main

    raise SystemExit(trtprof_main(sys.argv[2:]))


if __name__ == "__main__":
    main()
