"""A built-in multiple-choice task from any corpus: "which of these sentences comes next?".

Next-sentence prediction generalised to C choices (4 by default): for each pair of consecutive
sentences (A, B) of a document, the context is A, the right choice is B, and the C - 1 wrong ones
are sentences drawn from *other* documents (as NSP's NotNext segments). A wrong choice whose text
repeats the right one or another choice is drawn again (up to 20 times; a corpus of few distinct
sentences may keep a repeat). The right choice's position is uniform over
0..C-1. Everything is drawn from ``random.Random(seed)``, so the same documents and seed give the
same examples. It needs real text only, so it trains offline on any corpus (the bundled
Shakespeare, uploaded documents, Wikipedia).
"""
from __future__ import annotations

import random
from typing import Sequence

from engine.data.multiple_choice import MAX_CHOICES, MIN_CHOICES, ChoiceExample
from engine.text.documents import Document

_ATTEMPTS = 20          # redraws of a wrong choice that repeats a text already among the choices


def next_sentence_examples(documents: Sequence[Document], num_choices: int = 4, seed: int = 0,
                           max_examples: int | None = None) -> list[ChoiceExample]:
    """One example per consecutive sentence pair, in document order (the first ``max_examples``).

    ``ValueError`` when there are fewer than two documents with text, no document of two sentences,
    or ``num_choices`` is outside 2..5.
    """
    if not MIN_CHOICES <= num_choices <= MAX_CHOICES:
        raise ValueError(f"num_choices must be {MIN_CHOICES} to {MAX_CHOICES}, got {num_choices}")
    documents = [[s for s in doc if s.strip()] for doc in documents]
    documents = [doc for doc in documents if doc]
    if len(documents) < 2:
        raise ValueError("next-sentence choices need at least two documents: the wrong choices come from "
                         "other documents than the context's")
    rng = random.Random(seed)
    examples: list[ChoiceExample] = []
    for d, document in enumerate(documents):
        for i in range(len(document) - 1):
            if max_examples is not None and len(examples) >= max_examples:
                return examples
            context, right = document[i], document[i + 1]
            choices = [right]
            for _ in range(num_choices - 1):
                choices.append(_other_sentence(documents, d, choices, rng))
            wrong = choices[1:]
            answer = rng.randrange(num_choices)
            choices = wrong[:answer] + [right] + wrong[answer:]
            examples.append(ChoiceExample(context, choices, answer, f"document {d + 1}, sentence {i + 1}"))
    if not examples:
        raise ValueError("next-sentence choices need a document with at least two sentences")
    return examples


def _other_sentence(documents: Sequence[Document], own: int, taken: list[str], rng: random.Random) -> str:
    """A sentence of a document other than ``own``, whose text is not among ``taken`` when one can be found."""
    sentence = ""
    for _ in range(_ATTEMPTS):
        other = rng.randrange(len(documents) - 1)
        other += other >= own                               # any document but the context's
        sentence = documents[other][rng.randrange(len(documents[other]))]
        if sentence not in taken:
            return sentence
    return sentence
