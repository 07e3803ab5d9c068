"""Token-classification features: tagged words -> word pieces with one label per word.

**The alignment rule** (as ``transformers``' ``run_ner.py`` with ``label_all_tokens=False``): the
words are encoded as pre-split input in the tokenizer's single-text template (BERT: ``[CLS] w1 w2 ... [SEP]``),
each word cut into pieces by the model's own tokenizer as it would be inside a sentence (a byte-level one with
the space before the word, as ``run_ner.py``'s ``add_prefix_space=True``: ``engine.text.words``); a word's label
goes on its **first piece**, and its later pieces, the special tokens and padding get -100, which the loss and
the metrics skip.
A sentence longer than ``max_seq_length`` pieces is cut; its words past the cut have no label.
A word the tokenizer turns into no piece at all (only characters it drops) is unlabelled too.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from engine.data.features import IGNORE_INDEX, FeatureDataset
from engine.data.labels import check_known
from engine.data.tagged_text import TaggedSentence
from engine.text.tokenizer import WordPieceTokenizer
from engine.text.words import pre_split_encoder


def align_labels(word_ids: Sequence[int | None], word_labels: Sequence[int]) -> list[int]:
    """One label per piece: the word's label on its first piece, -100 on later pieces and specials."""
    labels, previous = [], None
    for word in word_ids:
        labels.append(IGNORE_INDEX if word is None or word == previous else word_labels[word])
        previous = word
    return labels


def build_token_dataset(sentences: Sequence[TaggedSentence], tokenizer: WordPieceTokenizer, label2id: dict[str, int],
                        max_seq_length: int, batch_size: int, seed: int = 0, shuffle: bool = True,
                        log: Callable[[str], object] | None = None) -> FeatureDataset:
    """The sentences as a ``FeatureDataset`` (layout ``tags``): one row of pieces per
    sentence, labels aligned by the rule above (an (N, max_seq_length) array, -100 padded).
    ``ValueError`` names an unknown tag and where it is; ``log`` hears how many words a cut dropped."""
    if not sentences:
        raise ValueError("no sentences to build token-classification features from")
    check_known([tag for s in sentences for tag in s.tags], label2id,
                [s.where for s in sentences for _ in s.tags])
    encoder = pre_split_encoder(tokenizer)     # a private copy: truncation is a tokenizer setting
    encoder.enable_truncation(max_seq_length)
    encodings = encoder.encode_batch([s.words for s in sentences], is_pretokenized=True)
    rows: list[np.ndarray] = []
    targets = np.full((len(sentences), max_seq_length), IGNORE_INDEX, dtype=np.int64)   # (N, S_max)
    cut_sentences = lost_words = 0
    for i, (sentence, encoding) in enumerate(zip(sentences, encodings)):
        labels = align_labels(encoding.word_ids, [label2id[tag] for tag in sentence.tags])
        rows.append(np.asarray(encoding.ids, dtype=np.int32))
        targets[i, :len(labels)] = labels
        labelled = sum(1 for label in labels if label != IGNORE_INDEX)
        if labelled < len(sentence.words):
            lost_words += len(sentence.words) - labelled
            cut_sentences += bool(encoding.overflowing)
    if log is not None and lost_words:
        log(f"{lost_words} word(s) have no label in the features: {cut_sentences} sentence(s) were longer than "
            f"{max_seq_length} pieces and were cut, other words made no word piece")
    segment_starts = [len(row) for row in rows]                 # one segment: every type id is 0
    return FeatureDataset("tags", rows, segment_starts, targets, max_seq_length, batch_size,
                          tokenizer.pad_token_id, seed, shuffle)
