"""The target builders the built-in heads name in their ``AttributionSpec`` (``engine.model.head_specs``).

Each has the one signature ``methods.make_target`` calls, ``(loaded, text, text_pair, target, which)
-> Target``, and maps those generic fields onto one head's own ``*_target`` function
(``engine.probes.attribution.targets``): what the second text is (a context, sentence B, the choices), what
``target`` names (a token, a label, a tag) and what ``which`` counts (masks, words, choices).
"""
from __future__ import annotations

from collections.abc import Sequence

from engine.model.loaded_model import LoadedModel
from engine.probes.attribution.targets import (
    Target, choose_target, classify_target, fill_mask_target, next_sentence_target, qa_target, tag_target,
)


def _pair(text_pair: str | Sequence[str] | None) -> str | None:
    """A one-text head's second text: a str or None (``TypeError`` otherwise)."""
    if text_pair is not None and not isinstance(text_pair, str):
        raise TypeError(f"text_pair must be a str or None, got {type(text_pair).__name__}")
    return text_pair


def fill_mask_for(loaded: LoadedModel, text: str, text_pair: str | None, target: str | None,
                  which: int | None) -> Target:
    """``fill_mask_target``: ``which`` [MASK], ``target`` token."""
    return fill_mask_target(loaded, text, _pair(text_pair) or None, which, target)


def qa_start_for(loaded: LoadedModel, text: str, text_pair: str | None, target: str | None,
                 which: int | None) -> Target:
    """``qa_target``'s start: ``text`` the question, ``text_pair`` the context."""
    return qa_target(loaded, text, _pair(text_pair) or "")


def qa_end_for(loaded: LoadedModel, text: str, text_pair: str | None, target: str | None,
               which: int | None) -> Target:
    """``qa_target``'s end: ``text`` the question, ``text_pair`` the context."""
    return qa_target(loaded, text, _pair(text_pair) or "", end=True)


def next_sentence_for(loaded: LoadedModel, text: str, text_pair: str | None, target: str | None,
                      which: int | None) -> Target:
    """``next_sentence_target``: ``target`` the label."""
    return next_sentence_target(loaded, text, _pair(text_pair) or "", target)


def classify_for(loaded: LoadedModel, text: str, text_pair: str | None, target: str | None,
                 which: int | None) -> Target:
    """``classify_target``: ``target`` the label."""
    return classify_target(loaded, text, _pair(text_pair) or None, target)


def tag_for(loaded: LoadedModel, text: str, text_pair: str | None, target: str | None, which: int | None) -> Target:
    """``tag_target``: ``which`` word, ``target`` its tag."""
    _pair(text_pair)
    return tag_target(loaded, text, which, target)


def choose_for(loaded: LoadedModel, text: str, text_pair: str | Sequence[str] | None, target: str | None,
               which: int | None) -> Target:
    """``choose_target``: ``text`` the context, ``text_pair`` the choices (a list, or one per line)."""
    choices = text_pair.splitlines() if isinstance(text_pair, str) else list(text_pair or [])
    return choose_target(loaded, text, [c.strip() for c in choices if c.strip()], which)
