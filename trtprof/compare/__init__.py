"""Comparisons: precisions (core), accuracy, A/B and what-ifs, imported trtexec runs, fix-fp16."""
