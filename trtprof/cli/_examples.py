"""Examples shown at the end of each subcommand's ``--help`` (kept here, beside no parser code, so
adding one does not touch the subcommand modules)."""
from __future__ import annotations

import argparse

EXAMPLES = {
    "build": """\
  trtprof build model.onnx --fp32 --fp16 --batch-sizes 1,8,32      # one engine per precision
  trtprof build saved_model_dir/ --fp16 --engines engines/          # TensorFlow: converted first
  trtprof build bert.onnx --shape input_ids:1x128 --batch-sizes 1,4  # a dynamic dim besides batch""",
    "bench": """\
  trtprof bench engines/ --csv results.csv                           # every engine, its built batch sizes
  trtprof bench engines/ --batch-sizes 1,8 --duration-s 10 --threads 4
  trtprof bench engines/model.fp16.onnxruntime.3f2a9c01d4e7.json --iterations 500
  Ctrl-C keeps what finished (results.json with "interrupted": true; exit 130).""",
    "plot": """\
  trtprof plot results.json --out plots/
  trtprof plot results.json --out plots/ --format svg""",
    "report": """\
  trtprof report compare.json -o report.html
  trtprof report results.json -o bench.html""",
    "demo": """\
  trtprof demo                                  # ./trtprof-demo: model, engines, results, plots
  trtprof demo --backend onnxruntime --batch-sizes 1,4 --iterations 300""",
    "convert": """\
  trtprof convert saved_model_dir/ -o model.onnx
  trtprof convert frozen.pb --inputs x:?x224x224x3 --outputs logits -o model.onnx""",
    "inspect": """\
  trtprof inspect engines/model.fp16.tensorrt.3f2a9c01d4e7.plan""",
    "compare": """\
  trtprof compare model.onnx --batch-sizes 1,8,32                   # builds what is missing
  trtprof compare engines/ --precisions fp32,fp16 --time-budget-s 20 --out compare.json""",
    "cache": """\
  trtprof cache ls engines/
  trtprof cache prune engines/ --corrupt               # corrupt entries, orphan artifacts, temp files
  trtprof cache prune engines/ --older-than 14d --model resnet50 --dry-run""",
    "profile": """\
  trtprof profile model.onnx --precisions fp32,fp16 --batch-size 8        # per-layer table (ORT on a CPU)
  trtprof profile model.onnx --backend torch --precisions fp32,tf32,fp16 --batch-size 256 --out layers.json
  trtprof profile engines/ --precisions fp32,fp16                          # engines already built""",
    "sweep": """\
  trtprof sweep sweep.toml --out sweep/                     # one worker per GPU of this host
  trtprof sweep --models a.onnx,b.onnx --precisions fp32,fp16 --batch-sizes 1,64 --out sweep/
  trtprof sweep sweep.toml --out sweep/ --resume            # after Ctrl-C: only the cells not done
  trtprof sweep sweep.toml --executor ray --address auto --out sweep/""",
    "train-compare": """\
  trtprof train-compare model.onnx --batch-sizes 10,256     # fp32,tf32,amp-fp16,amp-bf16 training steps
  trtprof train-compare model.onnx --precisions fp32,amp-bf16 --device cpu --steps 5 --out train.json
  trtprof train-compare model.keras --batch-sizes 10         # Keras: float32 vs mixed_float16""",
}


class _ExamplesFormatter(argparse.HelpFormatter):
    """Wraps the description as usual but keeps the examples' lines as written."""

    def _fill_text(self, text, width, indent):
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_examples(sub: "argparse._SubParsersAction") -> None:
    for name, parser in sub.choices.items():
        text = EXAMPLES.get(name)
        if text and not parser.epilog:
            parser.epilog = "examples:\n" + text
            parser.formatter_class = _ExamplesFormatter
