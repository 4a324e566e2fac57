# SPDX-License-Identifier: Apache-2.0
"""The model zoo: torchvision classification models and Hugging Face transformers, built with
random weights (no download), each with example inputs.

``zoo(size)`` gives one ``ZooModel`` per model: ``size="ci"`` is small (64 x 64 images, two
layers of width 32 for the transformers), ``size="full"`` the published architecture (224 x 224
images, Inception-v3 at 299; the transformers' default configurations). ``dynamic`` names the
input dimensions that may vary (batch, sequence length) for ``pl.graph.from_torch(dynamic=)``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from .torchvision_ops import import_torchvision


@dataclass(frozen=True)
class ZooModel:
    """A model of the zoo: ``make(route)`` builds it (eval mode, random weights; ``route``
    "torch" or "onnx"), ``inputs(batch)`` the example inputs (``onnx_inputs``, when given,
    for the ONNX route); ``dynamic`` maps each input's name to its dimensions that may vary."""

    name: str
    family: str                     # "vision" or "text"
    make: Callable[..., torch.nn.Module]
    inputs: Callable[[int], tuple]
    input_names: tuple[str, ...] = ("x",)
    dynamic: dict = field(default_factory=dict)
    onnx_inputs: Callable[[int], tuple] | None = None


def _image(side: int, channels: int = 3):
    def inputs(batch: int):
        return (torch.randn(batch, channels, side, side),)
    return inputs


def _tokens(vocab: int, seq: int, *, mask: bool = False):
    def inputs(batch: int, length: int = seq):
        ids = torch.randint(0, vocab, (batch, length))
        return (ids, torch.ones(batch, length, dtype=torch.int64)) if mask else (ids,)
    return inputs


class Logits(torch.nn.Module):
    """A Hugging Face model returning its first output tensor (the last hidden state)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model(x)
        return out[0] if isinstance(out, (tuple, list)) else out.last_hidden_state


def _no_zero_layers(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with random weights in its linear layers initialised to zero (ViT's head:
    an all-zero output cannot show a wrong one)."""
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and not m.weight.detach().any():
            torch.nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                torch.nn.init.normal_(m.bias, std=0.02)
    return model


def _keep_variance(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with He-initialised convolutions and linear layers, zero biases and random
    batch-norm scales (no constant offsets that would outgrow the image's signal)."""
    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            torch.nn.init.normal_(m.weight, std=(2.0 / m.weight[0].numel()) ** 0.5)
            if m.bias is not None:
                torch.nn.init.zeros_(m.bias)
        elif isinstance(m, torch.nn.BatchNorm2d):
            m.running_var.copy_(0.5 + torch.rand(m.num_features))
            with torch.no_grad():
                m.weight.copy_(0.5 + torch.rand(m.num_features))
    return model


def _seeded(fn):
    def make(route: str = "torch"):
        torch.manual_seed(0)
        return fn(route).eval()
    return make


VISION = ("resnet50", "resnext50_32x4d", "mobilenet_v2", "mobilenet_v3_large",
          "efficientnet_b0", "convnext_tiny", "vit_b_16", "swin_t", "densenet121",
          "squeezenet1_1", "shufflenet_v2_x1_0", "regnet_y_400mf", "googlenet", "inception_v3",
          "alexnet", "vgg11")


def _vision(name: str, size: str) -> ZooModel:
    tv = import_torchvision()
    side = (299 if name == "inception_v3" else 224) if size == "full" else \
        (80 if name == "inception_v3" else 64)
    kwargs: dict = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    if name == "vit_b_16":
        kwargs["image_size"] = side
    ctor = getattr(tv.models, name)
    if size == "ci" and name == "vit_b_16":       # ViT-B/16's code, two narrow layers
        ctor = tv.models.VisionTransformer
        kwargs = dict(image_size=side, patch_size=16, num_layers=2, num_heads=2, hidden_dim=32,
                      mlp_dim=64)
    # torch.onnx's TorchScript exporter only exports an adaptive pooling whose output size
    # divides its input's: AlexNet's 6 x 6 and VGG's 7 x 7 need the published 224 x 224
    onnx_side = 224 if name in ("alexnet", "vgg11") else None
    # freshly made, GoogLeNet's and ShuffleNetV2's outputs hardly depend on the image (below
    # the harness's bound): they get weights that keep the signal's variance
    fix = _keep_variance if name in ("googlenet", "shufflenet_v2_x1_0") else (lambda m: m)
    return ZooModel(name, "vision", _seeded(lambda route: fix(_no_zero_layers(ctor(**kwargs)))),
                    _image(side),
                    dynamic={"x": {0: "batch"}},
                    onnx_inputs=_image(onnx_side) if onnx_side else None)


def _hf_configs(size: str, layers: int = 2) -> dict:
    small = size == "ci"
    width = dict(hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                 intermediate_size=64) if small else {}
    return {
        "bert": ("BertModel", "BertConfig", dict(width, vocab_size=100) if small else {}),
        "distilbert": ("DistilBertModel", "DistilBertConfig",
                       dict(dim=32, n_layers=layers, n_heads=4, hidden_dim=64, vocab_size=100)
                       if small else {}),
        "roberta": ("RobertaModel", "RobertaConfig", dict(width, vocab_size=100) if small else {}),
        "gpt2": ("GPT2Model", "GPT2Config",
                 dict(n_embd=32, n_layer=layers, n_head=4, vocab_size=100) if small else {}),
        "llama": ("LlamaModel", "LlamaConfig",
                  dict(width, num_key_value_heads=2, vocab_size=100) if small else
                  dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                       num_key_value_heads=2, intermediate_size=1376, vocab_size=1000)),
        "vit": ("ViTModel", "ViTConfig", dict(width, image_size=64, patch_size=16)
                if small else {}),
        "t5_encoder": ("T5EncoderModel", "T5Config",
                       dict(d_model=32, d_kv=8, d_ff=64, num_layers=layers, num_heads=4,
                            vocab_size=100) if small else dict(vocab_size=32128)),
        "whisper_encoder": ("WhisperEncoder", "WhisperConfig",
                            dict(d_model=32, encoder_layers=layers, encoder_attention_heads=4,
                                 encoder_ffn_dim=64, num_mel_bins=16, max_source_positions=32,
                                 vocab_size=100) if small else {}),
    }


TEXT = ("bert", "distilbert", "roberta", "gpt2", "llama", "vit", "t5_encoder", "whisper_encoder")


def _text(name: str, size: str, layers: int = 2) -> ZooModel:
    import_torchvision()           # transformers imports torchvision when it is installed
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    model_cls, config_cls, kwargs = _hf_configs(size, layers)[name]
    if size == "ci":             # special tokens inside the small vocabulary
        kwargs.update(bos_token_id=1, eos_token_id=2, pad_token_id=0)
        if name == "whisper_encoder":
            kwargs.update(decoder_start_token_id=3)
    cls = WhisperEncoder if model_cls == "WhisperEncoder" else getattr(transformers, model_cls)

    def build(route: str) -> torch.nn.Module:
        config = getattr(transformers, config_cls)(**kwargs)
        # torch.onnx's TorchScript exporter cannot export grouped-query SDPA: the ONNX route
        # gets the eager attention, the same arithmetic written out
        config._attn_implementation = "eager" if route == "onnx" else "sdpa"
        return Logits(cls(config))
    make = _seeded(build)
    config = getattr(transformers, config_cls)(**kwargs)
    if name == "vit":
        return ZooModel(name, "text", make, _image(config.image_size),
                        dynamic={"x": {0: "batch"}})
    if name == "whisper_encoder":
        frames = 2 * config.max_source_positions
        return ZooModel(name, "text", make, _image_like(config.num_mel_bins, frames),
                        dynamic={"x": {0: "batch"}})
    seq = 7 if size == "ci" else 128
    return ZooModel(name, "text", make, _tokens(config.vocab_size, seq),
                    dynamic={"x": {0: "batch", 1: "seq"}})


def _image_like(bins: int, frames: int):
    def inputs(batch: int):
        return (torch.randn(batch, bins, frames),)
    return inputs


def zoo(size: str = "ci") -> dict[str, ZooModel]:
    """Every model of the zoo by name (``size``: "ci" or "full")."""
    models = {name: _vision(name, size) for name in VISION}
    models.update({name: _text(name, size) for name in TEXT})
    return models


def _random_norms(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with random batch-norm statistics and affine parameters (freshly made they are
    the identity, which hides a wrong folding of the mean or variance, and blocks of identity
    norms leave features too small to tell a wrong value from rounding)."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(n))
            m.running_var.copy_(0.5 + torch.rand(n))
            with torch.no_grad():
                m.weight.copy_(1 + torch.rand(n))
                m.bias.copy_(0.1 * torch.randn(n))
    return model


def _mobilenet_blocks(route: str) -> torch.nn.Module:
    """MobileNetV2's stem and first three blocks (ReLU6, depthwise 3 x 3 of strides 1 and 2,
    a residual add), then MobileNetV3-Small's fifth block (hardswish, stride-2 depthwise
    5 x 5, squeeze-excitation with hardsigmoid; both take 24 channels there): its feature
    map (pooled and classified, a random image's features are too close to a constant)."""
    tv = import_torchvision()
    v2 = tv.models.mobilenet_v2(weights=None).features
    v3 = tv.models.mobilenet_v3_small(weights=None).features
    return _random_norms(torch.nn.Sequential(*v2[0:4], v3[4]))


def _fire_modules(route: str) -> torch.nn.Module:
    """SqueezeNet 1.1's stem and two fire modules (pooling in ceil mode, concatenation),
    with a classifier like its own (1 x 1 convolution, global pooling)."""
    tv = import_torchvision()
    features = tv.models.squeezenet1_1(weights=None).features[:6]
    return torch.nn.Sequential(features, torch.nn.Conv2d(128, 10, 1), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())


def ci_slice() -> dict[str, ZooModel]:
    """The zoo CI runs: torchvision's own blocks cut from the classic models (34 x 34 images,
    so every stride and ceil-mode pooling leaves a remainder) and one-layer BERT and Llama
    (every converter class the zoo's models use, in builds of seconds)."""
    side = 34
    models = {
        "mobilenet_blocks": ZooModel("mobilenet_blocks", "vision", _seeded(_mobilenet_blocks),
                                     _image(side), dynamic={"x": {0: "batch"}}),
        "fire_modules": ZooModel("fire_modules", "vision", _seeded(_fire_modules),
                                 _image(side), dynamic={"x": {0: "batch"}}),
    }
    for name in ("bert", "llama"):
        models[f"tiny_{name}"] = replace(_text(name, "ci", layers=1), name=f"tiny_{name}")
    return models
