"""Building: model -> (TF conversion) -> one cached engine per precision, with the FP16 range analysis."""
