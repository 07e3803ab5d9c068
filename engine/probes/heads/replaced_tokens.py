"""Replaced-token detection: which tokens of a text ELECTRA's discriminator calls replaced, as
``ElectraForPreTraining`` computes it.

``replaced_tokens(loaded, text)`` encodes ``text`` with the model's own tokenizer (its special tokens, whatever they
are called), runs the discriminator head (``family_heads.REPLACED_TOKENS``) and returns a
:class:`ReplacedTokensResult`: each token as a reader sees it (``Tokenizer.display_piece``), its special-token role
(``special_roles.ROLES``: "cls", "sep", ... ; None for a piece of the text), its logit, and sigmoid(logit), the
probability that the token was replaced. Special tokens are named by role, never by BERT's names.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.head_inputs import batch_tensors, check_text, encode_pairs
from engine.text.special_roles import ROLES

HEAD = "replaced_tokens"


@dataclass
class ReplacedTokensResult:
    """The discriminator's verdict on every token of one text."""

    text: str
    source: str                       # which model (LoadedModel.source)
    tokens: list[str]                 # S pieces as shown to a reader, special tokens included
    roles: list[str | None]           # S: the special-token role of each ("cls", "sep", ...), None for the text's
    logits: list[float]               # S: above 0 where the discriminator calls the token replaced
    probabilities: list[float]        # S: sigmoid(logits), P(replaced)

    def replaced(self, threshold: float = 0.5) -> list[int]:
        """Positions of the text's pieces (not the special tokens) whose P(replaced) is above ``threshold``."""
        return [i for i, (p, role) in enumerate(zip(self.probabilities, self.roles))
                if role is None and p > threshold]


def token_roles(loaded: LoadedModel, input_ids: list[int]) -> list[str | None]:
    """Each id's special-token role (the first of ``ROLES`` whose token it is: RoBERTa's ``<s>`` is "cls" before
    "bos"), None for an ordinary piece."""
    tokenizer = loaded.require_tokenizer()
    role_of: dict[int, str] = {}
    for role in ROLES:
        token = tokenizer.roles.get(role)
        token_id = None if token is None else tokenizer.token_to_id(token)
        if token_id is not None:
            role_of.setdefault(token_id, role)
    return [role_of.get(i) for i in input_ids]


def replaced_tokens(loaded: LoadedModel, text: str) -> ReplacedTokensResult:
    """P(replaced) of every token of ``text`` from an ELECTRA discriminator's head.

    Raises ``ValueError`` for a model without that head (one not read from ``ElectraForPreTraining``), without a
    tokenizer, for an empty text, or one longer than the model reads.
    """
    if HEAD not in loaded.heads:
        raise ValueError(f"this model ({loaded.source}) has no replaced-token detection head: it comes with an "
                         "ELECTRA discriminator (transformers' ElectraForPreTraining)")
    check_text(text, "the text", "write a sentence in which the model should find the replaced words")
    encoding, = encode_pairs(loaded, [(text, None)], ["the text"])
    inputs = batch_tensors(loaded, [encoding])                           # (1, S) each
    with torch.inference_mode():
        out = loaded.model(**inputs, compute=(HEAD,))
        logits = out.result(HEAD).logits.float()[0]                     # (1, S) -> (S,)
        probabilities = torch.sigmoid(logits)                            # (S,)
    tokenizer = loaded.require_tokenizer()
    return ReplacedTokensResult(
        text=text, source=loaded.source, tokens=[tokenizer.display_piece(t) for t in encoding.tokens],
        roles=token_roles(loaded, encoding.input_ids), logits=logits.tolist(), probabilities=probabilities.tolist())
