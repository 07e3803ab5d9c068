"""Attention maps built from gold dependency trees, for the syntax probes' tests."""
from __future__ import annotations

import numpy as np

from engine.probes.syntax.conllu import DependencySentence


def gold_map(sentence: DependencySentence, gold: float = 0.5, rest: float = 0.01) -> np.ndarray:
    """(W, W) word-level map whose row for each word puts ``gold`` on its gold head (the root's row: ``rest``
    everywhere) and ``rest`` elsewhere."""
    words = len(sentence)
    found = np.full((words, words), rest)
    for i, head in enumerate(sentence.heads):
        if head:
            found[i, head - 1] = gold
    return found
