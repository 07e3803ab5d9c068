"""``LoadedModel``: a model ready to use, as the loaders (``engine.checkpoints.hf_format.load``) hand it over: its
weights and heads, its tokenizer, its config, where it came from, and the checkpoint keys it did not read. It says
what the model can do (``heads``, ``missing_heads``) and refuses in one sentence what it cannot
(``require_head``, ``require_tokenizer``); writing it back is ``engine.checkpoints.hf_format.save``."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.model.config import BertConfig
from engine.model.head_specs import HEADS
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer


@dataclass
class LoadedModel:
    """A model ready to use: weights, tokenizer, config and what it can do."""

    model: BertWithHeads
    tokenizer: WordPieceTokenizer | None
    config: BertConfig
    source: str
    path: Path | None = None
    ignored_keys: list[str] = field(default_factory=list)

    @property
    def heads(self) -> tuple[str, ...]:
        return self.model.heads

    @property
    def missing_heads(self) -> tuple[str, ...]:
        return tuple(h for h in self.model.specs if h not in self.model.heads)

    def require_head(self, head: str) -> None:
        """Raise a readable ``ValueError`` ("this model has no QA head") if ``head`` is absent."""
        if head not in self.model.heads:
            specs = self.model.specs                    # the heads its family reads
            spec = specs.get(head) or HEADS.get(head)
            raise ValueError(f"this model has no {spec.noun if spec else head} head ({self.source}); "
                             f"it has: {', '.join(specs[h].noun for h in self.heads) or 'no heads'}")

    def require_tokenizer(self, then: str = "so it cannot read text") -> WordPieceTokenizer:
        """The tokenizer, or a ``ValueError`` "this model (<source>) has no tokenizer files (vocab.txt or
        tokenizer.json), <then>": ``then`` says what cannot be done without one."""
        if self.tokenizer is None:
            raise ValueError(f"this model ({self.source}) has no tokenizer files (vocab.txt or tokenizer.json), "
                             f"{then}")
        return self.tokenizer
