"""Helpers for the reference checks: `transformers` models carrying exactly our weights.

Our module attribute names equal Hugging Face's, so a state dict maps one-to-one; the
only keys allowed to differ are the tied ones (`cls.predictions.decoder.bias` exists in
`transformers` as an alias of `cls.predictions.bias`).
"""
from __future__ import annotations

import os

import torch
import transformers

from engine.model.config import BertConfig
from engine.model.heads import IGNORE_INDEX, BertWithHeads

# Keys `transformers` has and we do not, because they are aliases of tied parameters.
TIED_ONLY_IN_HF = {"cls.predictions.decoder.bias"}
# Our module names that differ from transformers': it calls every classifier module `classifier`.
HF_MODULE_NAMES = {"token_classifier.": "classifier.", "multiple_choice.": "classifier."}


def hf_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our state dict under transformers' names (only the two renamed classifier modules change)."""
    out = {}
    for key, value in state.items():
        for ours, theirs in HF_MODULE_NAMES.items():
            if key.startswith(ours):
                key = theirs + key[len(ours):]
        out[key] = value
    return out


def hf_config(config: BertConfig, attn_implementation: str = "eager") -> transformers.BertConfig:
    """The `transformers.BertConfig` with our values (through our config.json dict)."""
    data = config.to_dict()
    data.pop("model_type")
    hf = transformers.BertConfig(**data)
    hf._attn_implementation = attn_implementation
    return hf


def hf_copy(ours: torch.nn.Module, hf_class: type, attn_implementation: str = "eager",
            **kwargs) -> torch.nn.Module:
    """A `hf_class` model holding `ours`'s weights, in eval mode.

    Loading is checked strictly: nothing may be unexpected, and the only missing keys
    allowed are tied aliases, which must then really be tied to the loaded tensor.
    """
    model = hf_class(hf_config(ours.config, attn_implementation), **kwargs)
    result = model.load_state_dict(hf_state(ours.state_dict()), strict=False)
    assert not result.unexpected_keys, f"our keys unknown to transformers: {result.unexpected_keys}"
    assert set(result.missing_keys) <= TIED_ONLY_IN_HF, f"keys transformers misses: {result.missing_keys}"
    if "cls.predictions.decoder.bias" in result.missing_keys:
        predictions = model.cls.predictions
        assert predictions.decoder.bias is predictions.bias
    if hasattr(model, "cls") and hasattr(model.cls, "predictions"):
        assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    return model.eval()


@torch.no_grad()
def randomize_(model: torch.nn.Module, seed: int, scale: float = 0.1) -> torch.nn.Module:
    """Give every parameter non-trivial values (biases non-zero, LayerNorm weights around 1).

    The BERT init leaves biases at 0 and LayerNorm at 1/0, which would hide a missing
    bias or LayerNorm affine in a parity check.
    """
    generator = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():  # tied parameters are listed once
        noise = torch.randn(param.shape, generator=generator, dtype=param.dtype) * scale
        if "LayerNorm.weight" in name:
            param.copy_(1.0 + noise)
        else:
            param.copy_(noise)
    return model


def batch(config: BertConfig, batch_size: int = 3, seq_len: int = 11, seed: int = 0,
          lengths: tuple[int, ...] | None = None) -> dict[str, torch.Tensor]:
    """input_ids, attention_mask (zeros at the end of some rows), token_type_ids (0s then 1s)."""
    generator = torch.Generator().manual_seed(seed)
    if lengths is None:
        lengths = tuple(seq_len - (3 * i) % seq_len for i in range(batch_size))  # 11, 8, 5, ...
    input_ids = torch.randint(1, config.vocab_size, (batch_size, seq_len), generator=generator)
    input_ids[input_ids == config.pad_token_id] = (config.pad_token_id + 1) % config.vocab_size
    attention_mask = torch.zeros(batch_size, seq_len, dtype=torch.long)
    token_type_ids = torch.zeros(batch_size, seq_len, dtype=torch.long)
    for row, length in enumerate(lengths):
        attention_mask[row, :length] = 1
        input_ids[row, length:] = config.pad_token_id
        token_type_ids[row, length // 2:length] = 1  # segment B is the second half of the real tokens
    if config.type_vocab_size > 2:
        token_type_ids[-1][token_type_ids[-1] == 1] = 2  # exercise every segment embedding row
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}"
    return (a.detach().double() - b.detach().double()).abs().max().item()


# ---- shared by test_model.py, test_heads.py, test_parity.py ----------------------------

PARITY = 1e-5   # ours vs transformers, fp32
PATHS = 1e-6    # fast (SDPA) vs explicit attention, head_mask definition, sparse vs dense MLM

CONFIGS = {
    # Odd sizes: 3 heads of 16, intermediate not a multiple of anything, 7 layers, pad id not 0,
    # a third segment type and a large LayerNorm eps (a model that ignored the config's eps fails).
    "odd": BertConfig(vocab_size=997, hidden_size=48, num_attention_heads=3, intermediate_size=100,
                      num_hidden_layers=7, max_position_embeddings=40, type_vocab_size=3, pad_token_id=3,
                      layer_norm_eps=1e-3, id2label={0: "a", 1: "b", 2: "c"}),
    "tiny": BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=37),
    "gelu_new": BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                           intermediate_size=64, hidden_act="gelu_new", layer_norm_eps=0.5),
    "relu": BertConfig(vocab_size=120, hidden_size=24, num_hidden_layers=2, num_attention_heads=6,
                       intermediate_size=50, hidden_act="relu", max_position_embeddings=16),
}



def check(label: str, a: torch.Tensor, b: torch.Tensor, tol: float) -> float:
    diff = max_diff(a, b)
    if os.environ.get("BERT_TEST_DIFFS"):
        print(f"\n  {label}: max abs diff {diff:.3g}", end="")
    assert diff <= tol, f"{label}: max abs diff {diff:.3g} > {tol:g}"
    return diff


def ours_with_heads(config: BertConfig, heads, seed: int = 0, **kwargs) -> BertWithHeads:
    torch.manual_seed(seed)
    return randomize_(BertWithHeads(config, heads, **kwargs), seed).eval()


def mlm_labels(inputs: dict[str, torch.Tensor], vocab_size: int, seed: int = 1, rate: float = 0.15) -> torch.Tensor:
    """-100 everywhere except ~rate of the real tokens (at least one per row)."""
    generator = torch.Generator().manual_seed(seed)
    real = inputs["attention_mask"].bool()
    chosen = (torch.rand(real.shape, generator=generator) < rate) & real
    chosen[:, 1] = True
    labels = torch.randint(0, vocab_size, real.shape, generator=generator)
    return torch.where(chosen, labels, torch.full_like(labels, IGNORE_INDEX))


def compare_encoder(label: str, ours, theirs, hidden_layers: int) -> None:
    """Every layer's hidden states and attentions: ``ours`` an ``EncoderOutput``, ``theirs`` transformers' output."""
    assert len(ours.hidden_states) == len(theirs.hidden_states) == hidden_layers + 1
    for i, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states)):
        check(f"{label} hidden_states[{i}]", a, b, PARITY)
    assert len(ours.attentions) == len(theirs.attentions) == hidden_layers
    for i, (a, b) in enumerate(zip(ours.attentions, theirs.attentions)):
        check(f"{label} attentions[{i}]", a, b, PARITY)


def assert_tied(model: BertWithHeads) -> None:
    decoder = model.cls.predictions.decoder.weight
    embeddings = model.bert.embeddings.word_embeddings.weight
    assert decoder is embeddings
    assert decoder.data_ptr() == embeddings.data_ptr()


def randomized(cls: type, config, seed: int = 0) -> torch.nn.Module:
    """A transformers model ``cls(config)`` in eager attention, every parameter drawn at random with std 0.3 (the
    norms too): peaked, distinct outputs for the families' parity tests."""
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = cls(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    return model
