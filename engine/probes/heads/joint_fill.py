"""Joint fill: every ``[MASK]`` filled in turn, the surest first, each step reading the words already filled.

The per-mask view (``fill_mask``, as the ``transformers`` pipeline) predicts each mask with all
the *other* masks still hidden, so its top guesses are independent: put side by side they need
not make a sentence the model would choose. ``joint_fill`` answers that question instead, by
greedy decoding in the model's own order:

1. run the model on the input with the still-masked positions as ``[MASK]``;
2. at each still-masked position take the top-1 token over the whole vocabulary and its
   probability (the softmax over the vocabulary, as in the per-mask view);
3. fill the position whose top-1 probability is highest; **equal probabilities: the leftmost
   first**; then go back to 1 with that token in place, until no mask is left.

One forward pass per mask. Target words are **not** used: the joint fill always ranks the whole
vocabulary (restricting every mask to the same few words rarely makes sense); the UI says so.
``probability`` is the product of the step probabilities: the probability of this fill when
the masks are filled in this order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.fill_mask import _encode, _piece
from engine.text.segment_ids import uses_segment_ids


@dataclass
class FillStep:
    """One step of a joint fill: which mask was filled, with what, and how sure the model was."""

    step: int            # 1-based order of filling
    mask: int            # which mask (0-based, in text order)
    position: int        # its position among the input tokens ([CLS] at 0)
    token_id: int
    token: str           # the vocabulary piece, e.g. "##ing"
    token_str: str       # decoded, as the pipeline's ``token_str``
    score: float         # its probability at this step (whole-vocabulary softmax)


@dataclass
class JointFill:
    """Every mask filled, the surest first; ``sequence`` is the filled input as text."""

    steps: list[FillStep]        # in filling order
    input_ids: list[int]         # the input with every mask filled
    sequence: str                # decoded without special tokens
    probability: float           # product of the step scores

    def to_dict(self) -> dict:
        """A JSON-able dict: ``{"steps": [...], "sequence", "probability"}``."""
        return {"steps": [vars(s).copy() for s in self.steps], "sequence": self.sequence,
                "probability": self.probability}


def joint_fill(loaded: LoadedModel, text: str, text_pair: str | None = None) -> JointFill:
    """Fill every mask of ``text`` (and ``text_pair``) one at a time, most confident first (see the module
    docstring). Raises ``ValueError`` as ``fill_mask`` does (no mask, too long, no tokenizer or MLM head)."""
    loaded.require_head("mlm")
    encoding, positions = _encode(loaded, text, text_pair)
    tokenizer, model = loaded.tokenizer, loaded.model
    device = next(model.parameters()).device
    input_ids = torch.tensor([encoding.input_ids], device=device)              # (1, S)
    token_type_ids = (torch.tensor([encoding.token_type_ids], device=device)   # (1, S); none without segments
                      if uses_segment_ids(loaded.config, tokenizer) else None)
    attention_mask = torch.ones_like(input_ids)                                # (1, S)
    remaining = list(positions)                                                # still masked, in text order
    steps: list[FillStep] = []
    with torch.inference_mode():
        while remaining:
            at = torch.zeros_like(input_ids, dtype=torch.bool)                 # (1, S): the MLM head runs only here
            at[0, remaining] = True
            logits = model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                           mlm_positions=at, compute=("mlm",)).mlm.logits.float()   # (R, V), in position order
            best, ids = logits.softmax(dim=-1).max(dim=-1)                     # (R,), (R,)
            scores, token_ids = best.tolist(), ids.tolist()
            r = max(range(len(remaining)), key=lambda i: (scores[i], -i))     # surest; a tie -> the leftmost
            position, token_id = remaining.pop(r), token_ids[r]
            input_ids[0, position] = token_id
            steps.append(FillStep(step=len(steps) + 1, mask=positions.index(position), position=position,
                                  token_id=token_id, token=_piece(tokenizer, token_id),
                                  token_str=tokenizer.decode([token_id], skip_special_tokens=False),
                                  score=scores[r]))
    filled = input_ids[0].tolist()
    # the text without the template's [CLS]/[SEP] and [PAD] (as the pipeline's sequences), but with every
    # filled token shown, even a special one the model chose
    kept = [t for i, (t, special) in enumerate(zip(filled, encoding.special_tokens_mask))
            if i in positions or (not special and t != tokenizer.pad_token_id)]
    return JointFill(steps=steps, input_ids=filled, sequence=tokenizer.decode(kept, skip_special_tokens=False),
                     probability=math.prod(s.score for s in steps))
