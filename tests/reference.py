"""Helpers for the reference checks: `transformers` models carrying exactly our weights.

Our module attribute names equal Hugging Face's, so a state dict maps one-to-one; the
only keys allowed to differ are the tied ones (`cls.predictions.decoder.bias` exists in
`transformers` as an alias of `cls.predictions.bias`).
"""
from __future__ import annotations

import torch
import transformers

from engine.config import BertConfig

# Keys `transformers` has and we do not, because they are aliases of tied parameters.
TIED_ONLY_IN_HF = {"cls.predictions.decoder.bias"}


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
    result = model.load_state_dict(ours.state_dict(), strict=False)
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
