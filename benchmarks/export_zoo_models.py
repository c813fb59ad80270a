"""Export architectures nobody here wrote to ONNX (issue 33 checks them; named issue33_models.py before
issue 41), random weights, no download:
torchvision ResNet-50, timm ViT-B/16, EfficientNet-B0, ConvNeXt-T, MobileNetV3-L, Swin-T, MobileViT-S (a conv/
transformer hybrid, 256×256), DeiT-S, transformers' GPT-2 (eager attention, no cache) and
BertModel(BertConfig()) wrapped so that forward(input_ids, attention_mask) calls it with keywords (its
positional/kwargs export fails: FACTS.md). ``torch.onnx.export`` (TorchScript exporter), opset 17,
dynamic batch. Run on the GPU machine (it has timm and transformers):

    python3 benchmarks/export_zoo_models.py OUT_DIR [NAME ...]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path


def export(model, example: tuple, names: list[str], path: Path) -> None:
    import torch

    axes = {n: {0: "batch"} for n in names + ["output"]}
    with torch.no_grad():
        torch.onnx.export(model.eval(), example, str(path), input_names=names, output_names=["output"],
                          opset_version=17, dynamic_axes=axes, dynamo=False)


def main() -> None:
    import torch

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    image = (torch.randn(1, 3, 224, 224),)

    def timm_model(name: str):
        import timm

        return timm.create_model(name, pretrained=False)

    def bert(attention: str | None = None):
        from transformers import BertConfig, BertModel

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                config = BertConfig()
                if attention:  # "eager": matmul, scale, mask, softmax, matmul (transformers' default is sdpa,
                    config._attn_implementation = attention  # which the exporter decomposes with a NaN guard)
                self.bert = BertModel(config)

            def forward(self, input_ids, attention_mask):
                return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        return Wrapped()

    def gpt2():
        from transformers import GPT2Config, GPT2Model

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                config = GPT2Config()
                config._attn_implementation = "eager"
                self.gpt2 = GPT2Model(config)

            def forward(self, input_ids):
                return self.gpt2(input_ids=input_ids, use_cache=False).last_hidden_state

        return Wrapped()

    import torchvision

    makers = {
        "resnet50": (lambda: torchvision.models.resnet50(), image, ["input"]),
        "vit_b16": (lambda: timm_model("vit_base_patch16_224"), image, ["input"]),
        "efficientnet_b0": (lambda: timm_model("efficientnet_b0"), image, ["input"]),
        "convnext_tiny": (lambda: timm_model("convnext_tiny"), image, ["input"]),
        "mobilenetv3_large": (lambda: timm_model("mobilenetv3_large_100"), image, ["input"]),
        "swin_tiny": (lambda: timm_model("swin_tiny_patch4_window7_224"), image, ["input"]),
        "mobilevit_s": (lambda: timm_model("mobilevit_s"), (torch.randn(1, 3, 256, 256),), ["input"]),
        "deit_small": (lambda: timm_model("deit_small_patch16_224"), image, ["input"]),
        "gpt2": (gpt2, (torch.randint(0, 50000, (1, 128)),), ["input_ids"]),
        "bert_eager": (lambda: bert("eager"), (torch.randint(0, 30000, (1, 128)), torch.ones(1, 128, dtype=torch.int64)),
                       ["input_ids", "attention_mask"]),
        "bert_base": (bert, (torch.randint(0, 30000, (1, 128)), torch.ones(1, 128, dtype=torch.int64)),
                      ["input_ids", "attention_mask"]),
    }
    for name in sys.argv[2:] or list(makers):
        make, example, names = makers[name]
        t0 = time.perf_counter()
        try:
            export(make(), example, names, out / f"{name}.onnx")
        except Exception as err:  # noqa: BLE001 - one architecture's export failure must not stop the others
            print(f"export of {name} failed: {type(err).__name__}: {str(err).splitlines()[0][:300]}", flush=True)
            continue
        print(f"exported {name} in {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
