"""The ``schema`` string of every JSON file trtprof writes, defined once.

Writers put these in their files and readers check them, so each string has one home that both
import: a copy in a reader drifts the day the writer bumps its version (the compare schema was copied
into report.py once). Bump a version when a field changes meaning or goes away; adding a field does
not need one. Imports nothing, so any module can read it without pulling in the writer.
"""
from __future__ import annotations

RESULTS = "trtprof.results/1"  # trtprof bench (results.ResultSet)
# /2: hierarchical CI (loads × rounds), four verdicts (faster/slower/equivalent/inconclusive),
# loads, verdict_note, shape and mean_ratio added; field names of /1 kept.
COMPARE = "trtprof.compare/2"  # trtprof compare (compare.report_value.CompareDocument)
COMPARE_V1 = "trtprof.compare/1"  # three verdicts, i.i.d. + round CI; still read by report and sweep
COMPARE_READABLE = (COMPARE, COMPARE_V1)
SWEEP = "trtprof.sweep/1"  # trtprof sweep's merged sweep.json (sweep.store)
TRAIN_COMPARE = "trtprof.train_compare/1"  # trtprof train-compare (train.run)
LAYERS = "trtprof.layers/1"  # trtprof profile (cli.profile)
