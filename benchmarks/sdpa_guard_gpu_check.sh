#!/usr/bin/env bash
# Does the why name the SDPA export's NaN guard on the GPU? (finding sdpa_nan_guard, issue 43 follow-up): a 2-layer
# SDPA block (boolean causal mask, d_model 512, 8 heads, seq 128) exported with torch.onnx.export (TorchScript, opset
# 17), then trtprof compare on the torch backend, fp32/fp16 at batch 16, --time-budget-s 20. Run from the repository
# root on the GPU machine, .whl carried (onnx2torch): bash benchmarks/sdpa_guard_gpu_check.sh; output in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
python3 - <<'PY'
import torch, torch.nn.functional as F
class M(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.l = torch.nn.Linear(512, 1536); s.o = torch.nn.Linear(512, 512)
    def forward(s, x):
        b = x.shape[0]
        mask = torch.ones(128, 128, dtype=torch.bool, device=x.device).tril()
        for _ in range(2):
            q, k, v = s.l(x).view(b, 128, 8, 192).transpose(1, 2).split(64, dim=-1)
            x = s.o(F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, 128, 512))
        return x
torch.manual_seed(0)
torch.onnx.export(M().eval(), (torch.randn(1, 128, 512),), '/tmp/sdpa.onnx', input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'b'}, 'y': {0: 'b'}}, opset_version=17, dynamo=False)
print("exported")
PY
timeout 150 python3 -m trtprof compare /tmp/sdpa.onnx --backend torch --precisions fp32,fp16 --batch-sizes 16 --time-budget-s 20 --engines /tmp/e_sdpa --out $OUT/sdpa_compare.json > $OUT/sdpa_compare.txt 2>&1; echo "rc=$?"
grep -n -i "nan guard\|^batch\|VALID\|sdpa" $OUT/sdpa_compare.txt | cut -c1-400 | head -20
