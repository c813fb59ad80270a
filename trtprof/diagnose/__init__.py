"""Why: diagnosis rules and their findings, the FP16 range analysis, per-layer rules."""
