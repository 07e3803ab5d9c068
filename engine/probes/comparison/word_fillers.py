"""Two models' fill-mask guesses compared by the words they write, for models whose vocabularies differ.

Piece ids mean nothing across vocabularies, so each vocabulary entry is read as the word it writes: its display
form (``Tokenizer.display_piece``: byte-level pieces decoded) with the word-start mark ``▁`` stripped, so
RoBERTa's ``Ġcapital``, XLM-R's ``▁capital`` and BERT's ``capital`` all read ``capital``; a WordPiece
continuation stays ``##ing`` (it writes no word of its own). When either tokenizer lower-cases its input, words
are compared lower-cased. Special tokens, pieces of only spaces or control characters, and byte-level pieces
that hold only part of a character write no word.

A word's probability at a mask is the **sum** over the entries that write it (``Ġthe`` and ``the``), so each
model has a distribution over words; its top-k are its k likeliest words and a word's rank is 1 + the number of
words that model finds likelier. A word that no single entry of a model's vocabulary writes has probability 0
and no rank there (one mask is one piece). Masks are paired by the aligned word that holds them
(``word_alignment``), not by piece position; a mask only one model reads is left out.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np
import torch

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.fill_mask import fill_mask_with_probabilities
from engine.probes.comparison.word_alignment import WordAlignment
from engine.text.piece_display import WORD_START

_VOCABULARIES: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
# what ``display_piece`` shows for spaces, newlines, tabs and other control characters: a piece of these only
# writes no word
_SPACE_MARKS = frozenset(WORD_START + "↵⇥␍␡" + "".join(chr(code) for code in range(0x2400, 0x2421)))


@dataclass(frozen=True)
class ComparedWord:
    """One candidate word at a mask, scored by both models."""

    word: str
    prob_a: float                # the sum of A's probabilities of the entries that write this word
    prob_b: float
    rank_a: int | None           # 1 = A's likeliest word; None when no entry of A's vocabulary writes it
    rank_b: int | None

    @property
    def token(self) -> str:
        """The filler as listed (the word)."""
        return self.word

    @property
    def change(self) -> float:
        """prob_b - prob_a."""
        return self.prob_b - self.prob_a


@dataclass(frozen=True)
class WordMask:
    """One mask both models read at the same word: A's top-k words, then B's that A did not list."""

    index: int                   # which mask (0-based, in text order, among those both models read)
    word: int                    # the masked word's index in the alignment
    position_a: int              # its token position in A's input
    position_b: int              # and in B's
    fillers: list[ComparedWord]
    top_k: int


def word_of_piece(tokenizer, piece: str, fold: bool) -> str:
    """The word a vocabulary ``piece`` writes: its display form without the word-start mark (lower-cased when
    ``fold``); "" for a piece that writes nothing but the mark, or only part of a character (a byte-level
    piece whose bytes are no whole UTF-8 character, shown as ``\\xe2``), or only spaces and control characters."""
    shown = tokenizer.display_piece(piece)
    if "\\" in shown and "\\" not in piece:
        return ""
    word = shown[len(WORD_START):] if shown.startswith(WORD_START) else shown
    if all(char in _SPACE_MARKS for char in word):
        return ""
    return word.lower() if fold else word


def word_vocabulary(tokenizer, size: int, fold: bool) -> tuple[list[str], np.ndarray]:
    """The words ``tokenizer``'s entries write, and for each of the model's ``size`` ids the index of its word
    (-1: a special token, an id the tokenizer lacks, or a piece that writes no word); cached per tokenizer."""
    with _LOCK:
        cached = _VOCABULARIES.setdefault(tokenizer, {})
        if (size, fold) in cached:
            return cached[(size, fold)]
    specials = tokenizer.special_ids()
    index = np.full(size, -1, dtype=np.int64)                                  # (V,)
    found: dict[str, int] = {}
    for piece, token_id in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1]):
        if token_id >= size or token_id in specials:
            continue
        word = word_of_piece(tokenizer, piece, fold)
        if word:
            index[token_id] = found.setdefault(word, len(found))
    result = (list(found), index)
    with _LOCK:
        _VOCABULARIES.setdefault(tokenizer, {})[(size, fold)] = result
    return result


def word_probabilities(probs: torch.Tensor, index: np.ndarray, num_words: int) -> torch.Tensor:
    """A distribution over words from one mask's ``(V,)`` piece probabilities: each word the sum over its
    entries -> ``(num_words,)`` float64."""
    ids = torch.from_numpy(index)                                              # (V,)
    keep = ids >= 0
    words = torch.zeros(num_words, dtype=torch.float64)                        # (W,)
    return words.index_add_(0, ids[keep], probs[: len(ids)][keep].double())


class _Side:
    """One model's words and its word distribution at each of its masks."""

    def __init__(self, loaded: LoadedModel, probs: torch.Tensor, fold: bool) -> None:
        self.words, index = word_vocabulary(loaded.tokenizer, probs.shape[-1], fold)
        self.ids = {word: i for i, word in enumerate(self.words)}
        self.dists = [word_probabilities(row, index, len(self.words)) for row in probs]   # M of (W,)

    def top(self, mask: int, k: int) -> list[str]:
        dist = self.dists[mask]
        return [self.words[i] for i in dist.topk(min(k, len(dist))).indices.tolist()]

    def score(self, mask: int, word: str) -> tuple[float, int | None]:
        """The word's probability and rank at ``mask``; (0.0, None) when this vocabulary cannot write it."""
        if word not in self.ids:
            return 0.0, None
        dist = self.dists[mask]
        prob = dist[self.ids[word]]
        return float(prob), int((dist > prob).sum()) + 1


def compare_fillers_by_words(a: LoadedModel, b: LoadedModel, alignment: WordAlignment, text: str,
                             text_pair: str | None = None, top_k: int = 5) -> list[WordMask]:
    """For each mask both models read at the same word: A's top-k words, then B's that A did not list, each with
    both models' probability and rank (see the module docstring)."""
    result_a, probs_a = fill_mask_with_probabilities(a, text, top_k, text_pair)       # probs (M_a, V_a)
    result_b, probs_b = fill_mask_with_probabilities(b, text, top_k, text_pair)       # probs (M_b, V_b)
    fold = bool(a.tokenizer.lowercase or b.tokenizer.lowercase)
    side_a, side_b = _Side(a, probs_a, fold), _Side(b, probs_b, fold)
    at_b = {alignment.word_at("b", position): m for m, position in enumerate(result_b.mask_positions)}
    masks: list[WordMask] = []
    for m_a, position_a in enumerate(result_a.mask_positions):
        word = alignment.word_at("a", position_a)
        m_b = at_b.get(word) if word is not None else None
        if m_b is None:
            continue
        listed = list(dict.fromkeys(side_a.top(m_a, top_k) + side_b.top(m_b, top_k)))   # A's order, B's extras
        fillers = [ComparedWord(w, *_pair(side_a.score(m_a, w), side_b.score(m_b, w))) for w in listed]
        masks.append(WordMask(len(masks), word, position_a, result_b.mask_positions[m_b], fillers, top_k))
    return masks


def _pair(score_a: tuple[float, int | None], score_b: tuple[float, int | None]) -> tuple:
    """(prob_a, prob_b, rank_a, rank_b) from each side's (probability, rank)."""
    return score_a[0], score_b[0], score_a[1], score_b[1]
