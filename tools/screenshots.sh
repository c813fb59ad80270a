#!/usr/bin/env bash
# Re-make docs/img/: the HTML reports and every plot kind, rendered as a reader sees them.
# Needs chromium (apt-get install -y chromium) and the venv; runs on a CPU (ONNX Runtime) in ~3 min.
# Usage: tools/screenshots.sh [WORKDIR]   (default: a fresh temp dir; docs/img/ is overwritten)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
py=${PYTHON:-$repo/.venv/bin/python}
[ -x "$py" ] || py=/work/main/.venv/bin/python
export PYTHONPATH=$repo
cd "$work"
shot() {  # shot PAGE.html OUT.png [W,H]
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$(mktemp -d)" \
    --screenshot="$2" --window-size="${3:-1280,2400}" "file://$work/$1" 2>/dev/null
}
"$py" -m trtprof demo --dir demo --backend onnxruntime --batch-sizes 1,8,32,128 >/dev/null
"$py" -m trtprof compare demo/demo_convnet.onnx --engines demo/engines --backend onnxruntime \
  --batch-sizes 1,8,32 --time-budget-s 5 --layers --out cmp.json >/dev/null 2>&1
"$py" -m trtprof report cmp.json --out report-cmp.html >/dev/null
"$py" -m trtprof report demo/results.json --out report-bench.html >/dev/null
"$py" -m trtprof report "$repo/benchmarks/results/gpu_why-2026-11-30/run3/compare-resnet50-eager.json.gz" \
  --out report-h200.html >/dev/null
"$py" -m trtprof report "$repo/benchmarks/results/gpu_serving-2026-12-01/serving-resnet50.json.gz" \
  --out report-serving.html >/dev/null
"$py" -m trtprof report "$repo/benchmarks/results/gpu_train-2026-11-30/train-resnet50.json.gz" \
  --out report-train.html >/dev/null
"$py" -m trtprof plot demo/results.json --out plots >/dev/null
# no page may scroll sideways in a 1280 px window (issue 34): the script stops here if one does
"$py" "$repo/tools/page_width.py" report-cmp.html report-bench.html report-h200.html report-serving.html report-train.html
# the distributions of the H200 compare, batch 1: its section cut out into a page of its own (a fixed crop of the
# whole page went stale when the sections above it grew: it showed the layer tables)
"$py" - <<'PY'
import re
text = open("report-h200.html", encoding="utf-8").read()
start = text.index("<h2>Latency distributions</h2>")
end = [m.start() for m in re.finditer(r"<h3>batch ", text[start:])][1] + start  # up to the second batch
open("report-dist.html", "w", encoding="utf-8").write(text[:text.index("<body>") + 6] + text[start:end] + "</body></html>")
PY
shot report-cmp.html cmp.png
shot report-bench.html bench.png
shot report-dist.html dist.png 1280,1200
shot report-serving.html serving.png 1280,2000
shot report-train.html train.png 1280,1400
"$py" - "$repo/docs/img" <<'PY'
import sys
from PIL import Image

out = sys.argv[1] + "/"

def save(im, name):  # 128 flat colours: the pages and plots have few, and the files stay small
    im.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        out + name, optimize=True)

save(Image.open("cmp.png"), "report-compare-cpu.png")
save(Image.open("bench.png"), "report-bench.png")
save(Image.open("serving.png"), "report-serving-h200.png")
save(Image.open("train.png"), "report-train-compare-h200.png")
save(Image.open("dist.png"), "report-distributions-h200.png")  # its batch-1 plots
for src, dst in [("hist_batch1", "plot-hist-linear"), ("hist_batch8", "plot-hist-log"), ("ecdf_batch1", "plot-ecdf"),
                 ("latency_vs_batch", "plot-latency_vs_batch"), ("throughput_vs_batch", "plot-throughput_vs_batch")]:
    save(Image.open(f"plots/{src}.png"), dst + ".png")
PY
ls -la "$repo/docs/img"
