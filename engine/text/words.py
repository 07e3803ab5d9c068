"""Words and their pieces, by the vocabulary's kind: which pieces start a word, and words given already split
encoded as the words of running text.

WordPiece marks a word's *later* pieces (the model's ``continuing_subword_prefix``, ``##`` in BERT's files).
SentencePiece (Unigram: XLM-R, ALBERT) and byte-level BPE (RoBERTa) mark a word's *first* piece instead, with the
space in front of it: the Metaspace ``replacement`` (``▁``), or the byte-level stand-in of the space byte
(``Ġ``). ``continues_word`` reads every piece of a vocabulary by its kind; a vocabulary with neither mark makes
each piece a word of its own. So a word is what the pre-tokenizer of a WordPiece vocabulary makes of the text
(punctuation is a word), and what lies between two spaces for the others (``dog.`` is one word), as their models
were pretrained. Special and added tokens never continue a word.

``pre_split_encoder``: tagged words arrive split; a byte-level vocabulary would read each one as the first word
of a text, without the space before it. transformers' RoBERTa tokenizer needs ``add_prefix_space=True`` for such
input (``run_ner.py`` sets it); this returns a copy of the pipeline with that setting, so every word reads as it
does inside a sentence.
"""
from __future__ import annotations

import json
from typing import Any, Iterator, Mapping

from tokenizers import Tokenizer, pre_tokenizers


def _parts(part: Any) -> Iterator[dict[str, Any]]:
    """``part`` (a pipeline step's JSON form) and every step nested in it (a ``Sequence``'s)."""
    if not isinstance(part, dict):
        return
    yield part
    for key in ("pretokenizers", "decoders", "processors", "normalizers"):
        for inner in part.get(key) or []:
            yield from _parts(inner)


def word_start_mark(described: Mapping[str, Any]) -> str | None:
    """The character a word's first piece starts with in a ``tokenizer.json`` (its parsed form): the Metaspace
    replacement, or the byte-level stand-in of a space; None when its pieces carry no such mark (WordPiece)."""
    for step in (*_parts(described.get("pre_tokenizer")), *_parts(described.get("decoder"))):
        if step.get("type") == "Metaspace":
            return str(step.get("replacement") or "▁")
        if step.get("type") == "ByteLevel":
            (space, _), = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(" ")
            return space
    return None


def marks_word_starts(tokenizer: Any) -> bool:
    """Whether ``tokenizer``'s vocabulary marks a word's first piece (SentencePiece, byte-level BPE) rather than
    its later ones (WordPiece): then a text's first word may lack the mark (byte-level BPE writes none before
    it), so a text that was encoded alone starts a word whatever its first piece."""
    described = json.loads(tokenizer.backend.to_str())
    prefix = (described.get("model") or {}).get("continuing_subword_prefix")
    return not prefix and word_start_mark(described) is not None


def continues_word(tokenizer: Any) -> list[bool]:
    """For every id of ``tokenizer``'s vocabulary (a ``WordPieceTokenizer``), whether its piece continues the
    word before it (see the module docstring); False for special and added tokens."""
    backend: Tokenizer = tokenizer.backend
    described = json.loads(backend.to_str())
    prefix = str((described.get("model") or {}).get("continuing_subword_prefix") or "")
    mark = None if prefix else word_start_mark(described)
    added = {str(token) for token in backend.get_added_tokens_decoder().values()}
    flags = [False] * tokenizer.vocab_size
    for piece, index in tokenizer.get_vocab().items():
        if piece in added or index >= len(flags):
            continue
        if prefix:
            flags[index] = piece.startswith(prefix)
        elif mark is not None:
            flags[index] = not piece.startswith(mark)
    return flags


def pre_split_encoder(tokenizer: Any) -> Tokenizer:
    """A private copy of ``tokenizer``'s pipeline (no padding, no truncation) that reads pre-split words
    (``is_pretokenized``) as words of running text: a byte-level one with a space before each word, as
    transformers' ``add_prefix_space=True``; any other kind as it is."""
    described = json.loads(tokenizer.backend.to_str())
    for key in ("pre_tokenizer", "post_processor"):
        for step in _parts(described.get(key)):
            if step.get("type") in ("ByteLevel", "RobertaProcessing") and "add_prefix_space" in step:
                step["add_prefix_space"] = True
    encoder = Tokenizer.from_str(json.dumps(described))
    encoder.no_padding()
    encoder.no_truncation()
    return encoder
