#!/bin/bash
# before (main c020b9e) and after (branch h8) alternately, ResNet-50 (Keras, tf2onnx) fp32/fp16 on ONNX Runtime CPU
M=/tmp/h8/models/resnet50.onnx
PY=/work/main/.venv/bin/python
run() {  # tree tag
  cd $1 && PYTHONPATH=$1 /usr/bin/time -f "wall %e s" nice -n 10 $PY benchmarks/compare_timeline.py compare $M --precisions fp32,fp16 \
     --backend onnxruntime --batch-sizes 1,4 --engines /tmp/h8/eng-$2 --time-budget-s 12 --out /tmp/h8/out3/$3.json > /tmp/h8/out3/$3.txt 2>&1
}
mkdir -p /tmp/h8/out3
# warm-base ran before
# engines built before
for i in 1 2; do
  run /tmp/h8/base base before-$i
  run /tmp/h8/after h8 after-$i
done
echo done > /tmp/h8/out3/DONE
