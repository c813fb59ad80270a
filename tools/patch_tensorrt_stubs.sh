#!/bin/sh
# Make tensorrt-stubs usable by mypy, without TensorRT installed.
#   sh tools/patch_tensorrt_stubs.sh SRC OUT
# SRC: a folder holding the installed tensorrt-stubs files (tensorrt/, tensorrt_bindings/), e.g. the
#      `pip install --target SRC --no-deps tensorrt-stubs==10.13.0.35.1` folder.
# OUT: where the patched copy goes (OUT/stubs), for mypy_path.
# Why: the published stubs (10.8 .. 10.13) do not parse: a parameter named `in`, a non-default
# parameter after a default one, and a module-level `bool: DataType` that shadows builtins.bool.
# The package also lacks py.typed, so mypy ignores it unless the stubs are on mypy_path.
# Known false positive: IOptimizationProfile.set_shape wants Dims; the real API accepts tuples.
set -e
SRC=${1:?usage: patch_tensorrt_stubs.sh SRC OUT}; OUT=${2:?usage: patch_tensorrt_stubs.sh SRC OUT}
[ -d "$SRC/tensorrt_bindings" ] || { echo "no tensorrt-stubs in $SRC" >&2; exit 1; }
rm -rf "$OUT/stubs" && mkdir -p "$OUT/stubs" && cp -r "$SRC/tensorrt" "$SRC/tensorrt_bindings" "$OUT/stubs/"
F="$OUT/stubs/tensorrt_bindings/tensorrt.pyi"
sed -i -E 's/([(,] ?)in: /\1in_: /g' "$F"
sed -i -E 's/(power: Weights = None, channel_axis: int)\)/\1 = ...)/' "$F"
sed -i -E '/^bool: DataType/! s/(->|:|\[|,|\|) ?bool\b/\1 builtins.bool/g' "$F"
sed -i '1a import builtins' "$F"
touch "$OUT/stubs/tensorrt_libs.pyi"
echo "$OUT/stubs"
