"""Sweeps: many models × precisions × batch sizes, spread over the GPUs of a host or a Ray cluster.

Why every cell is a separate ``trtprof`` process (``python -m trtprof.cli.sweep_worker … compare …``):
a process is the unit a GPU can be given to (``CUDA_VISIBLE_DEVICES``), the unit whose CPU cores
can be pinned, the unit Ray schedules, and the unit that can die without taking the sweep with it.
The sweep reads the cell's result JSON back and never imports the measuring code, so the cell's
statistics (``trtprof compare``) can change without touching the scheduling here.

Layout: ``spec`` (what to run: the SPEC file and the cells), ``cell`` (run one cell in a
subprocess, retry a crash once, read its result back), ``worker`` (the pinned entry point of those
subprocesses), ``local`` and ``ray_executor`` (where cells run), ``store`` (the append-only log that
makes finished cells survive Ctrl-C, neighbours, the merged result), ``runner`` (spec → executor →
store, ``--resume``), ``rows`` (one row per comparison: the CSV), ``matrix`` (the verdict matrix and
per-cell pages). Nothing here imports
ray, torch or onnxruntime at module level.
"""
