"""Head ablation: switch attention heads off and measure what the model loses.

``ablate_heads(loaded, text, text_pair, head_mask)`` runs the input twice, with every
head (baseline) and with ``head_mask`` (L, nh; 1 keeps a head, 0 removes it; it multiplies
the attention probabilities, as in the original BERT and Hugging Face), and reports:

* the MLM pseudo-log-likelihood loss: each non-special token masked in turn (one batched
  forward of the S copies), the mean negative log-probability of the true token (inputs of
  at most 128 tokens; over 32 evenly spaced tokens when there are more);
* for each ``[MASK]`` in the text, the top-k fillers with their probabilities;
* with a text pair and an NSP head, the probability of IsNext.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from engine.probes.attention.maps import check_head_index, encode_input, model_inputs
from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.checks import is_int
from engine.model.config import BertConfig
from engine.model.heads import IGNORE_INDEX

MAX_ABLATION_TOKENS = 128     # longest input (specials included) ablation scores
MAX_SCORED_TOKENS = 32        # at most this many positions (evenly spaced) in the pseudo-log-likelihood
TOKENS_PER_CHUNK = 4096       # rows x S per forward when scoring the masked copies
_SPLIT = re.compile(r"[,;\s]+")


@dataclass
class MaskFill:
    """Top-k fillers at one ``[MASK]``."""

    position: int
    token_ids: list[int]
    tokens: list[str]
    probs: list[float]


@dataclass
class AblationRun:
    """What the model does on the input under one head mask."""

    pll_loss: float | None              # mean negative log-probability of the true tokens (nats)
    token_losses: np.ndarray            # (n,) per scored position
    fills: list[MaskFill]               # one per [MASK] in the text
    is_next: float | None               # P(IsNext), with a pair and an NSP head


@dataclass
class AblationResult:
    """Baseline (all heads) vs ablated (``head_mask``) on one input."""

    text: str
    text_pair: str | None
    source: str
    tokens: list[str]
    head_mask: np.ndarray               # (L, nh) float, 1 keep / 0 drop
    masked_heads: list[tuple[int, int]]  # (layer, head) pairs with mask < 1
    scored_positions: list[int]         # positions scored in the pseudo-log-likelihood
    baseline: AblationRun
    ablated: AblationRun
    notes: list[str] = field(default_factory=list)

    @property
    def loss_change(self) -> float | None:
        """Ablated minus baseline pseudo-log-likelihood loss (positive = the model got worse)."""
        if self.baseline.pll_loss is None or self.ablated.pll_loss is None:
            return None
        return self.ablated.pll_loss - self.baseline.pll_loss


def _index_text(text: str) -> bool:
    """A plain 0-9 index of at most 6 digits ("²" and "٣" are digits to ``isdigit`` but not indices)."""
    text = text.strip()
    return text.isascii() and text.isdecimal() and len(text) <= 6


def parse_heads(text: str, num_layers: int, num_heads: int) -> list[tuple[int, int]]:
    """``"0:1, 2:3, 4:*"`` -> [(0, 1), (2, 3), (4, 0), ..., (4, nh-1)] (0-based; ``*`` = every head)."""
    found: dict[tuple[int, int], None] = {}
    for item in (p for p in _SPLIT.split(text or "") if p):
        layer_text, sep, head_text = item.partition(":")
        if not sep or not _index_text(layer_text) or not (_index_text(head_text) or head_text == "*"):
            raise ValueError(f"{item!r} is not layer:head; write heads like 0:1, 2:3 (0-based), or 4:* for a "
                             "whole layer")
        layer = int(layer_text)
        heads = range(num_heads) if head_text == "*" else [int(head_text)]
        for head in heads:
            found[check_head_index(num_layers, num_heads, layer, head)] = None
    return list(found)


def head_mask_from_heads(config: BertConfig, heads: Iterable[tuple[int, int]]) -> np.ndarray:
    """An (L, nh) mask of ones with zeros at the given (layer, head) pairs (indices checked)."""
    layers, num_heads = config.num_hidden_layers, config.num_attention_heads
    mask = np.ones((layers, num_heads), dtype=np.float32)
    for layer, head in heads:
        mask[check_head_index(layers, num_heads, layer, head)] = 0.0
    return mask


def check_head_mask(config: BertConfig, head_mask: object | None) -> np.ndarray:
    """``head_mask`` as an (L, nh) float array with values in [0, 1] (all ones when None)."""
    shape = (config.num_hidden_layers, config.num_attention_heads)
    if head_mask is None:
        return np.ones(shape, dtype=np.float32)
    mask = np.asarray(head_mask, dtype=np.float32)
    if mask.shape != shape:
        raise ValueError(f"head_mask must have shape (layers, heads) = {shape} for this model, got {mask.shape}")
    if not np.isfinite(mask).all() or (mask < 0).any() or (mask > 1).any():
        raise ValueError("head_mask values must lie between 0 (remove the head) and 1 (keep it)")
    return mask


def ablate_heads(loaded: LoadedModel, text: str, text_pair: str | None = None, head_mask: object | None = None,
                 top_k: int = 5, max_tokens: int = MAX_ABLATION_TOKENS,
                 max_scored: int = MAX_SCORED_TOKENS) -> AblationResult:
    """Baseline vs ablated MLM pseudo-log-likelihood, [MASK] fillers and P(IsNext) (see the module doc)."""
    if "mlm" not in loaded.heads:
        raise ValueError(f"this model ({loaded.source}) has no masked-LM head, so the effect of removing heads "
                         "cannot be measured; only attention maps are available for it")
    if not is_int(top_k) or top_k < 1:
        raise ValueError(f"top_k must be a whole number of at least 1, got {top_k!r}")
    mask = check_head_mask(loaded.config, head_mask)
    encoding = encode_input(loaded, text, text_pair, None)
    if len(encoding.input_ids) > max_tokens:
        raise ValueError(f"head ablation scores every token with its own masked copy, so it takes at most "
                         f"{max_tokens} tokens; this input has {len(encoding.input_ids)}. Shorten the text.")
    tokenizer = loaded.tokenizer
    mask_id = tokenizer.mask_token_id
    ids, types = model_inputs(loaded, encoding)
    mask_positions = [i for i, t in enumerate(encoding.input_ids) if t == mask_id]
    scored = [i for i, (t, special) in enumerate(zip(encoding.input_ids, encoding.special_tokens_mask))
              if not special and t != mask_id]
    pair = text_pair if text_pair and text_pair.strip() else None
    notes: list[str] = []
    cap = max(2, int(max_scored))
    if len(scored) > cap:                                                      # cost ~ scored x S: keep it fast
        keep = sorted({round(i * (len(scored) - 1) / (cap - 1)) for i in range(cap)})
        notes.append(f"the loss is over {len(keep)} of the {len(scored)} tokens (evenly spaced), to stay fast")
        scored = [scored[i] for i in keep]
    use_nsp = pair is not None and "nsp" in loaded.heads
    if pair is not None and not use_nsp:
        notes.append("this model has no next-sentence head, so P(IsNext) is not shown")
    if not scored:
        notes.append("no ordinary tokens to score (only special tokens and [MASK]s)")
    runs = [_run(loaded, ids, types, scored, mask_positions, head, top_k, use_nsp)
            for head in (None, torch.from_numpy(mask))]
    masked = [(int(layer), int(head)) for layer, head in zip(*np.nonzero(mask < 1))]
    if not masked:
        notes.append("no head is removed: the ablated run equals the baseline")
    return AblationResult(text=text, text_pair=pair, source=loaded.source, tokens=list(encoding.shown),
                          head_mask=mask, masked_heads=masked, scored_positions=scored,
                          baseline=runs[0], ablated=runs[1], notes=notes)


def _run(loaded: LoadedModel, ids: torch.Tensor, types: torch.Tensor, scored: list[int],
         mask_positions: list[int], head_mask: torch.Tensor | None, top_k: int, use_nsp: bool) -> AblationRun:
    """One condition: the pseudo-log-likelihood, [MASK] fillers and P(IsNext)."""
    model, tokenizer = loaded.model, loaded.tokenizer
    with torch.inference_mode():
        losses = _pseudo_log_likelihood(model, ids, types, scored, tokenizer.mask_token_id, head_mask)
        fills: list[MaskFill] = []
        is_next = None
        if mask_positions or use_nsp:
            at_masks = torch.zeros_like(ids, dtype=torch.bool)                 # (1, S): the [MASK] positions
            at_masks[0, mask_positions] = True
            compute = ("mlm",) * bool(mask_positions) + ("nsp",) * use_nsp
            out = model(ids, attention_mask=torch.ones_like(ids), token_type_ids=types, head_mask=head_mask,
                        mlm_positions=at_masks, compute=compute)
            if mask_positions:
                probs = out.mlm.logits.float().softmax(-1)                     # (M, V)
                values, picks = probs.topk(min(top_k, probs.shape[-1]))        # (M, k)
                for position, vals, idx in zip(mask_positions, values.tolist(), picks.tolist()):
                    fills.append(MaskFill(position, idx, [_piece(tokenizer, i) for i in idx], vals))
            if use_nsp:
                is_next = float(out.nsp.logits.float().softmax(-1)[0, 0])      # index 0 = IsNext
    return AblationRun(pll_loss=float(losses.mean()) if losses.size else None, token_losses=losses,
                       fills=fills, is_next=is_next)


def _pseudo_log_likelihood(model: torch.nn.Module, ids: torch.Tensor, types: torch.Tensor, positions: list[int],
                           mask_id: int, head_mask: torch.Tensor | None) -> np.ndarray:
    """-log p(true token) at each position when that position alone is masked; (n,) float64."""
    if not positions:
        return np.zeros(0)
    seq_len = ids.shape[1]
    where = torch.tensor(positions, device=ids.device)                        # (n,)
    rows = torch.arange(len(positions), device=ids.device)                    # (n,)
    copies = ids.expand(len(positions), seq_len).clone()                      # (n, S)
    copies[rows, where] = mask_id
    labels = torch.full_like(copies, IGNORE_INDEX)                            # (n, S)
    labels[rows, where] = ids[0, where]                                       # one label per row
    copy_types = types.expand(len(positions), seq_len)                        # (n, S)
    chunk = max(1, TOKENS_PER_CHUNK // seq_len)
    out: list[torch.Tensor] = []
    for start in range(0, len(positions), chunk):
        cancellation.check()                                                  # between chunks
        part = slice(start, start + chunk)
        chosen = labels[part] != IGNORE_INDEX                                 # (c, S): one position per copy
        mlm = model(copies[part], attention_mask=torch.ones_like(copies[part]), token_type_ids=copy_types[part],
                    head_mask=head_mask, mlm_positions=chosen, compute=("mlm",)).mlm
        # the logits rows follow ``chosen`` in row-major order: one per copy, in order.
        out.append(F.cross_entropy(mlm.logits.float(), labels[part][chosen], reduction="none"))  # (c,)
    return torch.cat(out).double().cpu().numpy()


def _piece(tokenizer, token_id: int) -> str:
    try:
        return tokenizer.id_to_token(token_id)
    except IndexError:
        return ""
