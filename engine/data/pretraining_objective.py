"""What a pretraining batch teaches: the objective (masked LM, left-to-right LM, or ELECTRA's replaced-token
detection), the mask mix, whether masks are drawn anew each time (dynamic) or fixed per corpus token (static), and
what the sentence pairs' label says (BERT's next sentence, or ALBERT's sentence order).

``PretrainingObjective`` is the data's view of the pretraining task's settings
(``engine.training.tasks.pretraining_settings``): ``PretrainingDataset`` and ``collate`` read it, and the
``PretrainingTask`` reads ``causal`` to give the encoder its causal attention mask. The default, masked LM with
80/10/10 dynamic masks, is BERT's, and a dataset at the default hashes and draws exactly as before these settings
existed (old runs resume).

- ``kind`` ``"mlm"``: masked LM (``engine.data.masking``); ``"clm"``: a left-to-right LM
  (``engine.data.causal_lm``: nothing masked, labels the next token), which has no sentence pairs (NSP off) and
  takes none of the masking settings; ``"rtd"``: ELECTRA's replaced-token detection, whose data is the masked LM's
  (its generator fills the masked positions: ``engine.training.tasks.replaced_tokens``).
- ``mask_mix``: of the chosen positions, the shares replaced by the mask token, by a random token, and kept.
- ``static``: masks fixed per corpus token (``engine.data.static_masking``) instead of drawn per batch.
- ``pair_task``: with sentence pairs, ``"nsp"`` (BERT: half the B segments come from another document) or
  ``"sop"`` (ALBERT's sentence order: A and B are always consecutive text of one document, and half the pairs are
  swapped; ``engine.data.instance_plan``). The pair label is 1 for NotNext / swapped either way.
- ``packing``: how the text is cut into inputs (``engine.data.packing``, RoBERTa's §4.2): ``segment-pair`` (BERT's,
  the default), ``sentence-pair`` (single sentences as the NSP segments), ``full-sentences`` (whole sentences up to
  the length, crossing documents with a separator between them; no NSP) or ``doc-sentences`` (never crossing).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.data.masking import DEFAULT_MASK_MIX, check_mask_mix
from engine.data.packing import PACKING_NAMES, PACKINGS

OBJECTIVES = ("mlm", "clm", "rtd")
OBJECTIVE_NAMES = {"mlm": "masked LM", "clm": "left-to-right LM (next token)",
                   "rtd": "replaced-token detection (ELECTRA)"}
PAIR_TASKS = ("nsp", "sop")
PAIR_TASK_NAMES = {"nsp": "next-sentence pairs", "sop": "sentence-order pairs"}


@dataclass(frozen=True)
class PretrainingObjective:
    """The objective, the mask mix, static or dynamic masking and the pairs' task; checked when made
    (``ValueError``)."""

    kind: str = "mlm"
    mask_mix: tuple[float, float, float] = DEFAULT_MASK_MIX
    static: bool = False
    pair_task: str = "nsp"
    packing: str = "segment-pair"

    def __post_init__(self) -> None:
        if self.packing not in PACKINGS:
            raise ValueError(f"packing must be one of {', '.join(PACKINGS)} (RoBERTa's input formats), got "
                             f"{self.packing!r}")
        if self.sentence_order and self.packing != "segment-pair":
            raise ValueError(f"pair_task sop (sentence order) swaps two segments of BERT's segment pairs; packing "
                             f"{self.packing} does not make them")
        if self.kind not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)} (masked LM, left-to-right LM, "
                             f"replaced-token detection), got {self.kind!r}")
        if self.pair_task not in PAIR_TASKS:
            raise ValueError(f"pair_task must be one of {', '.join(PAIR_TASKS)} (next sentence, sentence order), "
                             f"got {self.pair_task!r}")
        if self.kind != "mlm" and self.pair_task != "nsp":
            raise ValueError(f"pair_task {self.pair_task} is for the masked LM's sentence pairs; objective "
                             f"{self.kind} reads no pairs")
        object.__setattr__(self, "mask_mix", check_mask_mix(self.mask_mix))
        if not isinstance(self.static, bool):
            raise ValueError(f"static_masking must be true or false, got {self.static!r}")
        if self.causal and self.static:
            raise ValueError("static_masking is for the masked LM; objective clm (left-to-right) masks nothing")
        if self.causal and self.mask_mix != DEFAULT_MASK_MIX:
            raise ValueError("mask_mix is for the masked LM; objective clm (left-to-right) masks nothing")

    @property
    def causal(self) -> bool:
        """Whether this is the left-to-right LM (causal attention, next-token labels)."""
        return self.kind == "clm"

    @property
    def is_default(self) -> bool:
        """BERT's: masked LM, 80/10/10, dynamic."""
        return self == PretrainingObjective()

    @property
    def sentence_order(self) -> bool:
        """Whether the pairs are ALBERT's sentence order (consecutive, half swapped) instead of next sentence."""
        return self.pair_task == "sop"

    def key(self) -> tuple[Any, ...]:
        """What a data fingerprint adds for a non-default objective (nothing is added at the default; the pair
        task only when it is not NSP, so runs from before it existed keep their fingerprints)."""
        key: tuple[Any, ...] = ("objective", self.kind, tuple(self.mask_mix), self.static)
        key += ("pair_task", self.pair_task) if self.sentence_order else ()
        return key + ("packing", self.packing) if self.packing != "segment-pair" else key

    def describe(self) -> str:
        """``masked LM, mask mix 0.8/0.1/0.1, dynamic masks`` or ``left-to-right LM (next token)``."""
        packed = f", {PACKING_NAMES[self.packing]}" if self.packing != "segment-pair" else ""
        if self.causal:
            return OBJECTIVE_NAMES[self.kind] + packed
        mix = "/".join(f"{share:g}" for share in self.mask_mix)
        pairs = (f", {PAIR_TASK_NAMES[self.pair_task]}" if self.sentence_order else "") + packed
        return f"{OBJECTIVE_NAMES[self.kind]}, mask mix {mix}, {'static' if self.static else 'dynamic'} masks{pairs}"


MASKED_LM = PretrainingObjective()
