"""What a pretraining batch teaches: the objective (masked LM or left-to-right LM), the mask mix, and whether
masks are drawn anew each time (dynamic) or fixed per corpus token (static).

``PretrainingObjective`` is the data's view of the pretraining task's settings
(``engine.training.tasks.pretraining_settings``): ``PretrainingDataset`` and ``collate`` read it, and the
``PretrainingTask`` reads ``causal`` to give the encoder its causal attention mask. The default, masked LM with
80/10/10 dynamic masks, is BERT's, and a dataset at the default hashes and draws exactly as before these settings
existed (old runs resume).

- ``kind`` ``"mlm"``: masked LM (``engine.data.masking``); ``"clm"``: a left-to-right LM
  (``engine.data.causal_lm``: nothing masked, labels the next token), which has no sentence pairs (NSP off) and
  takes none of the masking settings.
- ``mask_mix``: of the chosen positions, the shares replaced by the mask token, by a random token, and kept.
- ``static``: masks fixed per corpus token (``engine.data.static_masking``) instead of drawn per batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.data.masking import DEFAULT_MASK_MIX, check_mask_mix

OBJECTIVES = ("mlm", "clm")
OBJECTIVE_NAMES = {"mlm": "masked LM", "clm": "left-to-right LM (next token)"}


@dataclass(frozen=True)
class PretrainingObjective:
    """The objective, the mask mix and static or dynamic masking; checked when made (``ValueError``)."""

    kind: str = "mlm"
    mask_mix: tuple[float, float, float] = DEFAULT_MASK_MIX
    static: bool = False

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)} (masked LM, left-to-right LM), "
                             f"got {self.kind!r}")
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

    def key(self) -> tuple[Any, ...]:
        """What a data fingerprint adds for a non-default objective (nothing is added at the default)."""
        return ("objective", self.kind, tuple(self.mask_mix), self.static)

    def describe(self) -> str:
        """``masked LM, mask mix 0.8/0.1/0.1, dynamic masks`` or ``left-to-right LM (next token)``."""
        if self.causal:
            return OBJECTIVE_NAMES[self.kind]
        mix = "/".join(f"{share:g}" for share in self.mask_mix)
        return f"{OBJECTIVE_NAMES[self.kind]}, mask mix {mix}, {'static' if self.static else 'dynamic'} masks"


MASKED_LM = PretrainingObjective()
