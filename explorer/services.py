"""Shared state handed to every tab's ``build(services)``.

Kept deliberately small: the loaded tokenizer and the longest sequence the app accepts.
The model registry and the training-worker handle join here later.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.tokenizer import WordPieceTokenizer

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TOKENIZER_DIR = REPO_ROOT / "assets" / "tokenizer"


@dataclass
class Services:
    """Everything the tabs share. One instance per app."""

    tokenizer: WordPieceTokenizer
    max_length: int = 512  # upper bound for every sequence-length control in the UI


def default_services(tokenizer_dir: str | Path = DEFAULT_TOKENIZER_DIR, max_length: int = 512) -> Services:
    """Load the bundled tokenizer (``assets/tokenizer``, bert-base-uncased vocab)."""
    return Services(tokenizer=WordPieceTokenizer.from_file(tokenizer_dir), max_length=max_length)
