#!/bin/bash
# before (main c020b9e) / after (h8) alternately: trtprof's demo conv net (64/128/256 channels, 128 px, 1000 classes),
# fp32 vs fp16 on ONNX Runtime CPU, batch sizes 1 and 8, the default budget (12 s per batch size)
M=/tmp/h8/models/convnet_mid.onnx
PY=/work/main/.venv/bin/python
run() {  # tree tag out
  cd $1 && PYTHONPATH=$1 /usr/bin/time -f "wall %e s" nice -n 10 $PY benchmarks/compare_timeline.py compare $M --precisions fp32,fp16 \
     --backend onnxruntime --batch-sizes 1,8 --engines /tmp/h8/eng2-$2 --out /tmp/h8/out2/$3.json > /tmp/h8/out2/$3.txt 2>&1
}
run /tmp/h8/base base warm-base
run /tmp/h8/after h8 warm-h8
for i in 1 2 3; do
  run /tmp/h8/base base before-$i
  run /tmp/h8/after h8 after-$i
done
echo done > /tmp/h8/out2/DONE
