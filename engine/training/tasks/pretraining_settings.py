"""Pretraining's own settings (``PretrainingSettings``, the ``PRETRAINING`` task's ``TaskDefinition.settings``): the
objectives the BERT paper's ablations compare.

- ``objective``: ``mlm`` (masked LM, the default), ``clm`` (a left-to-right LM: causal attention, each position
  predicts the next token with the MLM head, whose decoder is tied to the input embeddings; BERT's Table 5 "LTR &
  No NSP" and Figure 5; needs NSP off and whole-word masking off) or ``rtd`` (ELECTRA's replaced-token detection:
  a small generator trained with MLM fills the masked positions with its samples and the discriminator, the model
  saved, tells for every token whether it was replaced; ``engine.training.tasks.replaced_tokens``; needs NSP off).
- ``pair_task``: what the sentence pairs teach (with NSP on): ``nsp``, BERT's next sentence (half the B segments
  from another document), or ``sop``, ALBERT's sentence order (A and B always consecutive in one document, half of
  the pairs swapped). One setting rather than an ``sop`` switch: the two are alternatives for the same pair head
  and label, and whether there are pairs at all stays ``--nsp`` / ``--no-nsp`` (the model's pair head and the
  data's segment layout follow it, whatever the pairs teach).
- ``generator_size`` and ``rtd_weight`` (objective ``rtd`` only): the generator's hidden size as a fraction of the
  discriminator's (ELECTRA: 1/4), and λ, the discriminator loss's weight beside the generator's MLM loss (50).
- ``mask_mix``: of the chosen positions, the shares given the mask token, a random token, or kept, written
  ``0.8,0.1,0.1`` (the default; BERT's Table 8 compares others).
- ``static_masking``: each corpus token masked one way for the whole run (RoBERTa's static masking) instead of a
  fresh draw per batch (dynamic, the default).
- ``packing``: how the text is cut into inputs (RoBERTa's §4.2; ``engine.data.packing``): ``segment-pair``
  (BERT's, the default), ``sentence-pair`` (one sentence per segment; needs NSP), ``full-sentences`` (whole
  sentences up to the length, crossing into the next document after a separator token; needs NSP off) or
  ``doc-sentences`` (the same within one document; needs NSP off).

As every task's settings they are ``JobSpec.task_settings`` entries kept in ``run.json`` (defaults too), flags of
``python -m engine.pretrain`` (``--objective``, ``--mask-mix``, ``--static-masking``, ``--pair-task``,
``--generator-size``, ``--rtd-weight``, ``--packing``), and fixed once a run exists
(a resume takes the run's own). At their defaults the data draws and hashes exactly as before they existed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from engine.checks import is_finite_number
from engine.data.masking import DEFAULT_MASK_MIX, check_mask_mix
from engine.data.packing import PACKED, PACKINGS
from engine.data.pretraining_objective import OBJECTIVES, PAIR_TASKS, PretrainingObjective
from engine.training.loop.config import TrainingConfig

TASK = "pretraining"        # the name of the task these settings are for (``PRETRAINING``, its task objects)


def mix_text(shares: Sequence[float]) -> str:
    """``0.8,0.1,0.1``: three shares as written on the command line (each number as short as it stays exact)."""
    return ",".join(f"{x:g}" if float(f"{x:g}") == x else repr(float(x)) for x in shares)


def parse_mix(value: Any) -> tuple[float, float, float]:
    """``"0.8,0.1,0.1"`` (or three numbers) -> the checked shares; ``ValueError`` starting with ``mask_mix``."""
    if isinstance(value, str):
        parts = [part.strip() for part in value.replace("/", ",").split(",")]
        try:
            if len(parts) != 3:
                raise ValueError
            value = [float(part) for part in parts]
        except ValueError:
            raise ValueError(f"mask_mix must be three numbers separated by commas (mask token, random token, "
                             f"kept), such as 0.8,0.1,0.1; got {value!r}") from None
    return check_mask_mix(value, "mask_mix")


@dataclass(frozen=True)
class PretrainingSettings:
    """The pretraining objective, its mask mix, and static or dynamic masking (see the module)."""

    objective: str = field(default="mlm", metadata={
        "help": "mlm: masked LM (BERT); clm: left-to-right LM, each token predicts the next (needs --no-nsp); "
                "rtd: ELECTRA's replaced-token detection, a small generator fills the masks and the saved "
                "discriminator tells which tokens were replaced (needs --no-nsp)",
        "metavar": "|".join(OBJECTIVES)})
    mask_mix: str = field(default=mix_text(DEFAULT_MASK_MIX), metadata={
        "help": "of the masked positions, the shares given the mask token, a random token, or kept, adding up to 1",
        "metavar": "MASK,RANDOM,KEEP"})
    static_masking: bool = field(default=False, metadata={
        "help": "mask each corpus token one way for the whole run (RoBERTa's static masking) instead of drawing "
                "new masks for every batch"})
    pair_task: str = field(default="nsp", metadata={
        "help": "what the sentence pairs teach: nsp, next sentence (BERT: half the second segments from another "
                "document); sop, sentence order (ALBERT: two consecutive segments, half of them swapped)",
        "metavar": "|".join(PAIR_TASKS)})
    generator_size: float = field(default=0.25, metadata={
        "help": "objective rtd: the generator's hidden size as a fraction of the discriminator's (ELECTRA: 1/4)",
        "metavar": "FRACTION"})
    rtd_weight: float = field(default=50.0, metadata={
        "help": "objective rtd: the weight of the discriminator's loss beside the generator's masked-LM loss "
                "(ELECTRA's lambda: 50)", "metavar": "LAMBDA"})
    packing: str = field(default="segment-pair", metadata={
        "help": "how the text is cut into inputs (RoBERTa, section 4.2): segment-pair, BERT's; sentence-pair, one "
                "sentence per segment (needs NSP); full-sentences, whole sentences up to the length, going on into "
                "the next document after a separator (needs --no-nsp); doc-sentences, the same within a document "
                "(needs --no-nsp)", "metavar": "|".join(PACKINGS)})

    def __post_init__(self) -> None:
        object.__setattr__(self, "mask_mix", mix_text(parse_mix(self.mask_mix)))   # canonical text in run.json
        self.data_objective()                                  # checks the objective and the combination
        for name, low, high in (("generator_size", 0.0, 1.0), ("rtd_weight", 0.0, math.inf)):
            value = getattr(self, name)
            if isinstance(value, bool) or not is_finite_number(value) or not low < value <= high:
                raise ValueError(f"{name} must be a number above {low:g}" + (f" and at most {high:g}" if
                                 high < math.inf else "") + f", got {value!r}")
            object.__setattr__(self, name, float(value))
            if self.objective != "rtd" and value != getattr(PretrainingSettings, name):
                raise ValueError(f"{name} is for objective rtd (ELECTRA's generator and discriminator), not "
                                 f"{self.objective}")

    def data_objective(self) -> PretrainingObjective:
        """What the data and the task read (``engine.data.pretraining_objective``)."""
        return PretrainingObjective(self.objective, parse_mix(self.mask_mix), self.static_masking, self.pair_task,
                                    self.packing)

    def check_job(self, spec: Any, config: TrainingConfig) -> None:
        """The left-to-right LM reads one text per row and masks nothing: NSP and whole-word masking off;
        replaced-token detection has no pair head (NSP off); sentence order needs the pairs (NSP on)."""
        if self.pair_task == "sop" and not config.nsp:
            raise ValueError("pair_task sop (sentence order) is a task for sentence pairs: keep next-sentence "
                             "pairs on (drop --no-nsp)")
        if self.packing in PACKED and config.nsp:
            raise ValueError(f"packing {self.packing} (RoBERTa) packs one text per input with no sentence pairs: "
                             f"turn next-sentence prediction off (--no-nsp)")
        if self.packing == "sentence-pair" and not config.nsp:
            raise ValueError("packing sentence-pair makes next-sentence pairs of single sentences: keep "
                             "next-sentence pairs on (drop --no-nsp)")
        if self.objective == "rtd" and config.nsp:
            raise ValueError("objective rtd (ELECTRA's replaced-token detection) reads one text per row and has "
                             "no pair head: turn next-sentence prediction off (--no-nsp)")
        if self.objective != "clm":
            return
        if config.nsp:
            raise ValueError("objective clm (a left-to-right LM) reads one text per row and has no sentence pairs: "
                             "turn next-sentence prediction off (--no-nsp)")
        if config.whole_word_masking:
            raise ValueError("objective clm (a left-to-right LM) masks nothing, so whole-word masking does not "
                             "apply: turn whole-word masking off")


def objective_of(settings: PretrainingSettings | None) -> PretrainingObjective:
    """The data objective of pretraining settings (None: the default, BERT's masked LM)."""
    return settings.data_objective() if settings is not None else PretrainingObjective()
