"""A model key as a value: which model a probing tab, the picker or an API caller means.

Keys travel as text (the picker's values, the API's ``model_key`` parameter). This module is the only one
that knows how that text is spelled:

- ``default``: the bundled model in ``assets/default-model`` (or the folder / hub id configured);
- ``live``: an eval-mode snapshot of the model being trained right now;
- ``untrained``: the default model's untrained twin (same shape, heads and tokenizer, fresh seeded weights);
- ``checkpoint:<run>/<step-dir>``: a checkpoint of a training run under the runs folder;
- ``local:<allowed folder>/<path inside>``: an HF-format folder inside one of the allowed model folders
  (``local:<server path>`` still works; the registry sends clients the short form);
- ``hub:<owner/name>``: a hub model;
- any other text is a plain name: a model pinned under it (tests, a model built in memory), or what the
  registry still has to read as a folder or a hub id (``ModelRegistry.resolve``).

``ModelKey.parse`` takes the text apart once, where a request enters (``ModelRegistry.resolve``); the
registry carries the value from there; ``str(key)`` (``key.text``) is the one place that writes it back.
No Gradio, no file system.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum

MAX_SOURCE_CHARS = 4096          # longer "model names" are refused before they reach the file system
SEPARATOR = ":"
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")     # a checkpoint's step folder


class KeyKind(StrEnum):
    """What a key names; a ``StrEnum``, so ``KeyKind.HUB == "hub"`` (``ModelChoice.kind`` reads the same)."""

    DEFAULT = "default"
    LIVE = "live"
    UNTRAINED = "untrained"
    CHECKPOINT = "checkpoint"
    LOCAL = "local"
    HUB = "hub"
    NAME = "name"                # no prefix: a pinned model's name, or text the registry still has to read


PREFIXED = (KeyKind.CHECKPOINT, KeyKind.LOCAL, KeyKind.HUB)     # spelled ``<kind>:<reference>``
_BARE = (KeyKind.DEFAULT, KeyKind.LIVE, KeyKind.UNTRAINED)                          # spelled as the kind alone


def check_text(source: str | None) -> str:
    """``source`` stripped; ValueError (a sentence) when it is empty, too long or holds control characters."""
    text = (source or "").strip()
    if not text:
        raise ValueError("Choose a model: 'default', a checkpoint, a local folder or a hub id (owner/name).")
    if len(text) > MAX_SOURCE_CHARS:
        raise ValueError(f"That model name is too long ({len(text):,} characters; at most {MAX_SOURCE_CHARS:,}): "
                         "type a folder path or a hub id (owner/name).")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError("The model name holds control characters (a NUL byte, a line break, ...): "
                         "type a folder path or a hub id (owner/name).")
    return text


def usable_run_name(name: str) -> bool:
    """Whether a run folder's name can be part of a ``checkpoint:<run>/<step>`` key: any name the file system
    holds except ``.``/``..`` and names with control characters (``check_text`` refuses those in every key)."""
    return (bool(name) and name not in (".", "..") and len(name) <= 255
            and not any(sep and sep in name for sep in (os.sep, os.altsep, "/"))
            and not any(ord(c) < 32 or ord(c) == 127 for c in name))


def _split(text: str) -> tuple[KeyKind, str]:
    """(kind, reference) of a key's text."""
    if text in _BARE:
        return KeyKind(text), ""
    prefix, separator, rest = text.partition(SEPARATOR)
    if separator and prefix in PREFIXED:
        return KeyKind(prefix), rest
    return KeyKind.NAME, text


@dataclass(frozen=True)
class ModelKey:
    """A key taken apart: its ``kind`` and its ``reference`` (the text after the prefix; for a plain name the
    name itself; empty for ``default``, ``live`` and ``untrained``). ``str(key)`` gives the key's text back."""

    kind: KeyKind
    reference: str = ""

    def __post_init__(self) -> None:
        if self.kind in _BARE and self.reference:
            raise ValueError(f"a {self.kind} key takes no reference")
        if self.kind is KeyKind.NAME and (not self.reference or _split(self.reference)[0] is not KeyKind.NAME):
            raise ValueError(f"{self.reference!r} is not a plain name")

    @classmethod
    def parse(cls, text: str) -> ModelKey:
        """The key ``text`` spells (no checks of what it names; text without a prefix is a plain name).
        ``str(ModelKey.parse(text)) == text`` for every non-empty text."""
        return cls(*_split(text))

    @classmethod
    def read(cls, source: str | None) -> ModelKey:
        """What a user typed, checked (``check_text``) and parsed: where a request's key enters."""
        return cls.parse(check_text(source))

    @classmethod
    def checkpoint(cls, run: str, step_dir: str) -> ModelKey:
        """``checkpoint:<run>/<step_dir>``."""
        return cls(KeyKind.CHECKPOINT, f"{run}/{step_dir}")

    @classmethod
    def local(cls, where: str) -> ModelKey:
        """``local:<where>``: ``<allowed folder>/<path inside>``, or a server path the registry maps to that."""
        return cls(KeyKind.LOCAL, where)

    @classmethod
    def hub(cls, repo_id: str) -> ModelKey:
        """``hub:<owner/name>``."""
        return cls(KeyKind.HUB, repo_id)

    @property
    def text(self) -> str:
        """The key as clients see it: what the picker lists and the API takes."""
        if self.kind in PREFIXED:
            return f"{self.kind}{SEPARATOR}{self.reference}"
        return self.reference if self.kind is KeyKind.NAME else str(self.kind)

    def __str__(self) -> str:
        return self.text

    @property
    def run(self) -> str:
        """A checkpoint key's run name ("" for any other key)."""
        return self.reference.partition("/")[0] if self.kind is KeyKind.CHECKPOINT else ""

    @property
    def step_dir(self) -> str:
        """A checkpoint key's step folder, ``step-000300`` ("" for any other key)."""
        return self.reference.partition("/")[2] if self.kind is KeyKind.CHECKPOINT else ""

    @property
    def is_checkpoint_name(self) -> bool:
        """A checkpoint key whose run and step folder are plain folder names (no ``..``, no separators)."""
        return (self.kind is KeyKind.CHECKPOINT and usable_run_name(self.run)
                and bool(_PLAIN_NAME.match(self.step_dir)) and ".." not in self.step_dir)


DEFAULT = ModelKey(KeyKind.DEFAULT)
LIVE = ModelKey(KeyKind.LIVE)
UNTRAINED = ModelKey(KeyKind.UNTRAINED)
