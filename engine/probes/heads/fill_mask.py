"""Fill-mask: top-k predictions for every mask, shaped like the ``transformers`` pipeline, for every family.

A text may write the mask as ``[MASK]`` or as the model's own mask token (found by role: RoBERTa's and
XLM-R's ``<mask>``, whose left space the token absorbs as in ``"... is <mask>."``); ``[MASK]`` is rewritten
to it before encoding. Segment ids go in only where transformers passes them (``segment_ids.uses_segment_ids``), and the longest input is ``config.max_tokens``.

``fill_mask(loaded, text)`` returns exactly what ``pipeline("fill-mask")`` returns on the
same weights: for one mask a list of ``{"score", "token", "token_str", "sequence"}``; for
several masks one such list per mask, in order. The pipeline's rules, matched here:

* ``score`` is the softmax over the *whole* vocabulary at the mask, also with ``targets``
  (the targets' probabilities are read from that distribution, not renormalised);
* ``top_k`` is capped at the number of distinct target ids when ``targets`` are given;
* a target that is not a vocabulary entry is tokenized without specials and its *first*
  piece is used (with a warning); targets mapping to the same id count once;
* ``token_str`` is the decode of the single id (so ``"##ing"`` stays ``"##ing"``);
* ``sequence`` decodes the input with that one prediction put in its mask's place and
  ``[PAD]`` ids dropped: special tokens skipped for one mask, but *kept* for several
  masks (the other masks stay ``[MASK]``, and ``[CLS]``/``[SEP]`` appear too).

Where the pipeline would crash or silently do something odd we raise a clear
``ValueError`` instead: no mask, empty text, ``top_k < 1``, an input longer than the
model's positions, an empty target or one that maps only to ``[UNK]``. ``top_k`` larger
than the vocabulary is clamped to the vocabulary size (the pipeline raises).

``fill_mask_details`` returns a :class:`FillMaskResult` with more for the UI (positions,
input tokens, probabilities of requested targets, entropy); one sentence over a run's checkpoints is
``engine.probes.heads.fill_mask_checkpoints``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from engine.model.loaded_model import LoadedModel
from engine.checks import require_int
from engine.text.segment_ids import uses_segment_ids

logger = logging.getLogger(__name__)

BERT_MASK = "[MASK]"            # what the app's examples and users type; any family reads it as its mask


@dataclass
class TargetInfo:
    """How one requested target word was resolved to a vocabulary id."""

    text: str            # as the user gave it
    token_id: int
    token: str           # the vocabulary piece used
    exact: bool          # True if ``text`` is itself a vocabulary entry; False if its first piece was taken


@dataclass
class MaskPrediction:
    """The predictions at one ``[MASK]``, best first."""

    index: int                   # which mask (0-based, in text order)
    position: int                # its position among the input tokens (with [CLS] at 0)
    token_ids: list[int]
    tokens: list[str]            # vocabulary pieces, e.g. "##ing" or RoBERTa's "Ġcapital"
    token_strs: list[str]        # decoded, as the pipeline's ``token_str``
    scores: list[float]          # probabilities over the whole vocabulary
    sequences: list[str]         # the input with this prediction filled in (pipeline's ``sequence``)
    entropy: float               # of the full distribution at this mask, in nats
    target_probabilities: dict[str, float] = field(default_factory=dict)  # requested target -> probability
    tracked: dict[str, float] = field(default_factory=dict)  # token -> probability (filled by the checkpoint probe)
    display_tokens: list[str] = field(default_factory=list)  # the pieces as shown (``display_piece``: "▁capital")


@dataclass
class FillMaskResult:
    """Everything the Fill-mask tab draws for one input on one model."""

    text: str
    text_pair: str | None
    source: str                  # which model (LoadedModel.source)
    input_ids: list[int]
    tokens: list[str]            # input pieces, specials included
    token_type_ids: list[int]
    mask_positions: list[int]
    top_k: int                   # the effective k (after clamping)
    masks: list[MaskPrediction]
    targets: list[TargetInfo] | None = None
    warnings: list[str] = field(default_factory=list)

    def to_pipeline(self) -> list[dict[str, Any]] | list[list[dict[str, Any]]]:
        """The ``transformers`` fill-mask pipeline's output for this result."""
        rows = [[{"score": s, "token": t, "token_str": ts, "sequence": seq}
                 for s, t, ts, seq in zip(m.scores, m.token_ids, m.token_strs, m.sequences)]
                for m in self.masks]
        return rows[0] if len(rows) == 1 else rows


def fill_mask(loaded: LoadedModel, text: str, top_k: int = 5, targets: str | Sequence[str] | None = None,
              text_pair: str | None = None) -> list[dict[str, Any]] | list[list[dict[str, Any]]]:
    """Top-k fillers for each ``[MASK]`` in ``text``, in the ``transformers`` pipeline's shape."""
    return fill_mask_details(loaded, text, top_k, targets, text_pair).to_pipeline()


def fill_mask_details(loaded: LoadedModel, text: str, top_k: int = 5, targets: str | Sequence[str] | None = None,
                      text_pair: str | None = None) -> FillMaskResult:
    """Like :func:`fill_mask`, but as a :class:`FillMaskResult` with positions, tokens and target probabilities."""
    return _run(loaded, text, top_k, targets, text_pair)[0]


def fill_mask_with_probabilities(loaded: LoadedModel, text: str, top_k: int = 5, text_pair: str | None = None,
                                 targets: str | Sequence[str] | None = None) -> tuple[FillMaskResult, torch.Tensor]:
    """:func:`fill_mask_details` (ranking ``targets`` if given) and the full probabilities at the masks, (M, V) on
    the CPU, in text order."""
    return _run(loaded, text, top_k, targets, text_pair)


# --- internals ---

def _check_top_k(top_k: int) -> None:
    require_int(top_k, "top_k")
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")


def _resolve_targets(loaded: LoadedModel, targets: str | Sequence[str],
                     warnings: list[str]) -> tuple[list[TargetInfo], list[int]]:
    """Targets -> (one TargetInfo each, the distinct ids in the pipeline's order ``list(set(ids))``)."""
    tokenizer = loaded.tokenizer
    if isinstance(targets, str):
        targets = [targets]
    if not targets:
        raise ValueError("targets is empty: give at least one word, or no targets to rank the whole vocabulary")
    vocab = tokenizer.get_vocab()
    infos: list[TargetInfo] = []
    for target in targets:
        if not isinstance(target, str):
            raise TypeError(f"each target must be a str, got {type(target).__name__}")
        token_id = vocab.get(target)
        if token_id is not None:
            infos.append(TargetInfo(target, token_id, target, True))
            continue
        pieces = tokenizer.backend.encode(target, add_special_tokens=False).ids
        if not pieces:
            raise ValueError(f"target {target!r} is empty once tokenized; give a word from the vocabulary")
        token_id = pieces[0]
        if token_id == tokenizer.unk_token_id:
            raise ValueError(f"target {target!r} is not in the vocabulary: it tokenizes to "
                             f"{tokenizer.id_to_token(token_id)}")
        token = tokenizer.id_to_token(token_id)
        message = (f"target {target!r} is not in the vocabulary; using {token!r}"
                   + (f", the first of its {len(pieces)} pieces" if len(pieces) > 1 else ""))
        logger.warning(message)
        warnings.append(message)
        infos.append(TargetInfo(target, token_id, token, False))
    return infos, list({info.token_id for info in infos})  # set order, exactly as the pipeline


def model_mask_text(tokenizer, text: str | None) -> str | None:
    """``text`` with each ``[MASK]`` written as the model's own mask token (RoBERTa's ``<mask>``), so either
    spelling is the mask; a family whose mask token is ``[MASK]`` (BERT, ALBERT) reads ``text`` unchanged."""
    mask = tokenizer.mask_token
    if not text or mask is None or mask == BERT_MASK:
        return text
    return text.replace(BERT_MASK, mask)


def _encode(loaded: LoadedModel, text: str, text_pair: str | None):
    tokenizer = loaded.require_tokenizer("so it cannot fill in masks")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text is empty: write a sentence with a [MASK] token, e.g. 'Nice to [MASK] you.'")
    mask_id = tokenizer.require_token_id("mask")
    mask = tokenizer.mask_token
    limit = loaded.config.max_tokens
    encoding = tokenizer.encode(model_mask_text(tokenizer, text), model_mask_text(tokenizer, text_pair) or None,
                                max_length=limit, truncation=False)
    if len(encoding.input_ids) > limit:
        raise ValueError(f"the input is {len(encoding.input_ids)} tokens long but this model takes at most "
                         f"{limit} (special tokens included); shorten the text")
    positions = [i for i, t in enumerate(encoding.input_ids) if t == mask_id]
    if not positions:
        spelled = BERT_MASK if mask == BERT_MASK else f"{BERT_MASK} (or {mask})"
        raise ValueError(f"no mask token found: add at least one {spelled} token to the text (the model's mask "
                         f"token is {mask}, written exactly so, e.g. 'Nice to {BERT_MASK} you.')")
    return encoding, positions


def fill_mask_logits(loaded: LoadedModel, text: str, text_pair: str | None = None) -> np.ndarray:
    """The MLM head's logits at each mask of ``text``, ``(M, V)`` float32 numpy in text order: the one model run
    behind any *Top-k* or *targets* (:func:`fill_mask_from_logits`)."""
    loaded.require_head("mlm")
    encoding, positions = _encode(loaded, text, text_pair)
    return _mask_logits(loaded, encoding, positions).cpu().numpy()


def fill_mask_from_logits(loaded: LoadedModel, text: str, logits: np.ndarray, top_k: int = 5,
                          targets: str | Sequence[str] | None = None,
                          text_pair: str | None = None) -> FillMaskResult:
    """:func:`fill_mask_details` from logits :func:`fill_mask_logits` gave for the same text, with no model run."""
    _check_top_k(top_k)
    encoding, positions = _encode(loaded, text, text_pair)
    if logits.shape != (len(positions), loaded.config.vocab_size):
        raise ValueError(f"logits of shape {logits.shape} for {len(positions)} masks and a vocabulary of "
                         f"{loaded.config.vocab_size}")
    return _build(loaded, text, text_pair, encoding, positions, torch.from_numpy(logits), top_k, targets)[0]


def _mask_logits(loaded: LoadedModel, encoding, positions: list[int]) -> torch.Tensor:
    """One forward: the MLM logits at ``positions``, (M, V) float32."""
    model = loaded.model
    device = next(model.parameters()).device
    input_ids = torch.tensor([encoding.input_ids], device=device)              # (1, S)
    token_type_ids = (torch.tensor([encoding.token_type_ids], device=device)   # (1, S); none without segments
                      if uses_segment_ids(loaded.config, loaded.tokenizer) else None)
    attention_mask = torch.ones_like(input_ids)                                # (1, S)
    at_masks = torch.zeros_like(input_ids, dtype=torch.bool)                   # (1, S): run the MLM head only here
    at_masks[0, positions] = True
    with torch.inference_mode():
        mlm = model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                    mlm_positions=at_masks, compute=("mlm",)).mlm
        return mlm.logits.float()                                               # (M, V), masks in text order


def _run(loaded: LoadedModel, text: str, top_k: int, targets: str | Sequence[str] | None,
         text_pair: str | None) -> tuple[FillMaskResult, torch.Tensor]:
    """Compute a :class:`FillMaskResult` and the full (M, V) probabilities at the masks."""
    _check_top_k(top_k)
    loaded.require_head("mlm")
    encoding, positions = _encode(loaded, text, text_pair)
    if targets is not None:
        _resolve_targets(loaded, targets, [])                                  # bad targets fail before the run
    return _build(loaded, text, text_pair, encoding, positions, _mask_logits(loaded, encoding, positions), top_k,
                  targets)


def _build(loaded: LoadedModel, text: str, text_pair: str | None, encoding, positions: list[int],
           logits: torch.Tensor, top_k: int, targets: str | Sequence[str] | None,
           ) -> tuple[FillMaskResult, torch.Tensor]:
    """The result from the (M, V) logits at the masks: softmax, top-k or the targets' ranks, the sequences."""
    tokenizer = loaded.tokenizer
    warnings: list[str] = []
    infos, target_ids = _resolve_targets(loaded, targets, warnings) if targets is not None else (None, None)
    with torch.inference_mode():
        probs = logits.softmax(dim=-1)                                          # (M, V)
        entropy = -(probs * torch.log(probs.clamp_min(1e-30))).sum(-1)          # (M,)
        vocab_size = probs.shape[-1]
        if top_k > vocab_size:
            warnings.append(f"top_k={top_k} is larger than the vocabulary; using {vocab_size}")
            top_k = vocab_size
        if target_ids is not None:
            top_k = min(top_k, len(target_ids))                                 # the pipeline's cap
            chosen = probs[:, torch.tensor(target_ids, device=probs.device)]    # (M, T)
            values, picks = chosen.topk(top_k)                                  # (M, k)
            predictions = torch.tensor(target_ids, device=picks.device)[picks]  # (M, k) vocabulary ids
        else:
            values, predictions = probs.topk(top_k)                             # (M, k)
    probs = probs.cpu()

    single = len(positions) == 1
    masks: list[MaskPrediction] = []
    for m, position in enumerate(positions):
        ids = predictions[m].tolist()
        sequences = []
        for token_id in ids:
            filled = list(encoding.input_ids)
            filled[position] = token_id
            filled = [t for t in filled if t != tokenizer.pad_token_id]  # the pipeline drops [PAD] ids
            sequences.append(tokenizer.decode(filled, skip_special_tokens=single))
        masks.append(MaskPrediction(
            index=m, position=position, token_ids=ids,
            tokens=[_piece(tokenizer, i) for i in ids],
            display_tokens=[tokenizer.display_piece(_piece(tokenizer, i)) for i in ids],
            token_strs=[tokenizer.decode([i], skip_special_tokens=False) for i in ids],
            scores=values[m].tolist(), sequences=sequences, entropy=float(entropy[m]),
            target_probabilities={info.text: float(probs[m, info.token_id]) for info in infos or ()},
        ))
    result = FillMaskResult(
        text=text, text_pair=text_pair or None, source=loaded.source, input_ids=list(encoding.input_ids),
        tokens=list(encoding.shown), token_type_ids=list(encoding.token_type_ids), mask_positions=positions,
        top_k=top_k, masks=masks, targets=infos, warnings=warnings,
    )
    return result, probs


def _piece(tokenizer, token_id: int) -> str:
    """The vocabulary piece, or ``""`` for an id the model has but the tokenizer lacks."""
    try:
        return tokenizer.id_to_token(token_id)
    except IndexError:
        return ""
