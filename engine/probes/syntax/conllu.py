"""CoNLL-U files read into :class:`DependencySentence`: words, 1-based heads (0 = the root), relations, UPOS.

The Universal Dependencies rules (https://universaldependencies.org/format.html): ten tab-separated columns per
word line; ``#`` lines are comments (``# text = ...`` kept); a blank line ends a sentence; a multiword token
(ID ``1-2``) is a surface form whose words follow on their own lines, so it is skipped; an empty node (ID
``3.1``, enhanced graphs only) is skipped. Relations keep their universal part (``nmod:poss`` -> ``nmod``).
A file is untrusted: read as a regular file under a size cap (``engine.regular_files``), and any line that
breaks a rule raises a ``ValueError`` sentence naming the line. Numbers (ID, HEAD, the ends of a multiword range,
an empty node's ID) are ASCII digits, at most ``MAX_ID_DIGITS`` of them, checked before ``int()``; a multiword
range must end inside its sentence.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.regular_files import read_text

SAMPLE_PATH = Path(__file__).resolve().parents[3] / "assets" / "ud" / "en_ewt-sample.conllu"
MAX_FILE_BYTES = 16 * 2**20          # a CoNLL-U file larger than this is refused
MAX_SENTENCES = 5_000                # more sentences than this are refused (the probes run them all)
MAX_WORDS = 200                      # words per sentence
MAX_ID_DIGITS = 6                    # an ID or HEAD longer than this is refused before it is read as a number
UPOS_TAGS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
             "PUNCT", "SCONJ", "SYM", "VERB", "X")


@dataclass(frozen=True)
class DependencySentence:
    """One sentence's syntactic words (multiword tokens and empty nodes left out), in order."""

    words: tuple[str, ...]
    heads: tuple[int, ...]            # 1-based index of each word's head; 0 = the root
    relations: tuple[str, ...]        # universal relation, subtype dropped ("nmod:poss" -> "nmod")
    upos: tuple[str, ...]
    sent_id: str = ""
    text: str = ""
    line: int = 0                     # the file line of the first word
    extra: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.words)


def universal_relation(deprel: str) -> str:
    """The universal part of a relation: ``"nmod:poss"`` -> ``"nmod"``, ``"obl:tmod"`` -> ``"obl"``."""
    return deprel.split(":", 1)[0]


def read_conllu(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> list[DependencySentence]:
    """The sentences of the CoNLL-U file at ``path`` (a regular file of at most ``max_bytes``)."""
    name = Path(path).name
    return parse_conllu(read_text(path, max_bytes), name)


def read_sample() -> list[DependencySentence]:
    """The bundled sample (``assets/ud/en_ewt-sample.conllu``, UD English EWT, CC BY-SA 4.0)."""
    return read_conllu(SAMPLE_PATH)


def parse_conllu(text: str, name: str = "the file") -> list[DependencySentence]:
    """The sentences of CoNLL-U ``text``; ``ValueError`` naming ``name`` and the line of the first problem."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    sentences: list[DependencySentence] = []
    block: list[tuple[int, str]] = []
    for number, raw in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
        if raw.strip():
            block.append((number, raw.rstrip("\r")))
            continue
        if block:
            if not all(line.startswith("#") for _, line in block):      # a block of comments only is no sentence
                sentences.append(_sentence(block, name))
            block = []
            if len(sentences) > MAX_SENTENCES:
                raise ValueError(f"{name} has more than {MAX_SENTENCES:,} sentences; give a smaller sample")
    if block and not all(line.startswith("#") for _, line in block):
        sentences.append(_sentence(block, name))
    if len(sentences) > MAX_SENTENCES:
        raise ValueError(f"{name} has more than {MAX_SENTENCES:,} sentences; give a smaller sample")
    if not sentences:
        raise ValueError(f"{name} holds no sentence: a CoNLL-U file has one word per line in ten tab-separated "
                         "columns and a blank line after each sentence")
    return sentences


def _sentence(block: Sequence[tuple[int, str]], name: str) -> DependencySentence:
    """One sentence from its non-blank lines (comments and word lines)."""
    comments: dict[str, str] = {}
    words: list[str] = []
    heads: list[int] = []
    relations: list[str] = []
    upos: list[str] = []
    ranges: list[tuple[int, str, str]] = []            # (last word, ID, where) of each multiword token
    first = 0
    for number, line in block:
        where = f"{name}, line {number}"
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep:
                comments.setdefault(key.strip(), value.strip())
            continue
        columns = line.split("\t")
        if len(columns) != 10:
            raise ValueError(f"{where} has {len(columns)} tab-separated column(s); CoNLL-U word lines have 10 "
                             "(ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)")
        word_id = columns[0]
        if "-" in word_id or "." in word_id:
            end = _check_skipped_id(word_id, len(words), where)
            if end is not None:
                ranges.append((end, word_id, where))
            continue                                   # a multiword token's surface form, or an empty node
        if _number(word_id) != len(words) + 1:
            raise ValueError(f"{where}: word ID {word_id[:20]!r} should be {len(words) + 1} (IDs count 1, 2, 3, ... "
                             "in each sentence)")
        form, tag, head, deprel = columns[1], columns[3], columns[6], columns[7]
        if not form:
            raise ValueError(f"{where}: word {word_id} has an empty FORM column")
        if tag not in UPOS_TAGS:
            raise ValueError(f"{where}: {tag[:20]!r} is not a universal part-of-speech tag (UPOS is one of "
                             f"{', '.join(UPOS_TAGS)})")
        if _number(head) is None:
            raise ValueError(f"{where}: the HEAD of word {word_id} is {head[:20]!r}; it must be a word ID of the "
                             "sentence or 0 for the root")
        if not deprel or deprel == "_":
            raise ValueError(f"{where}: word {word_id} has no dependency relation (DEPREL)")
        first = first or number
        words.append(form)
        heads.append(int(head))
        relations.append(universal_relation(deprel))
        upos.append(tag)
    where = f"{name}, the sentence at line {first or block[0][0]}"
    if not words:
        raise ValueError(f"{where} has no word lines")
    if len(words) > MAX_WORDS:
        raise ValueError(f"{where} has {len(words)} words; at most {MAX_WORDS} are read")
    for end, word_id, line_where in ranges:
        if end > len(words):
            raise ValueError(f"{line_where}: the multiword token {word_id!r} ends at word {end}, but the sentence "
                             f"has {len(words)} words")
    _check_tree(heads, relations, where)
    return DependencySentence(tuple(words), tuple(heads), tuple(relations), tuple(upos),
                              sent_id=comments.get("sent_id", ""), text=comments.get("text", ""), line=first,
                              extra=comments)


def _number(text: str) -> int | None:
    """``text`` as a whole number when it is 1 to ``MAX_ID_DIGITS`` ASCII digits, else None (never ``int()`` of
    thousands of digits, nor of other scripts' digits)."""
    if 0 < len(text) <= MAX_ID_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return None


def _check_skipped_id(word_id: str, seen: int, where: str) -> int | None:
    """A multiword range ``a-b`` (``a`` the next word, ``a < b``: returns ``b``, checked against the sentence once
    it is read) or an empty node ``n.m`` (``n`` the last word: returns None)."""
    if "-" in word_id:
        start, _, end = word_id.partition("-")
        low, high = _number(start), _number(end)
        if low is None or high is None or low != seen + 1 or high <= low:
            raise ValueError(f"{where}: {word_id[:20]!r} is not a multiword token range starting at the next word "
                             f"({seen + 1}-N)")
        return high
    whole, _, part = word_id.partition(".")
    if _number(whole) != seen or _number(part) is None:
        raise ValueError(f"{where}: {word_id[:20]!r} is not an empty node ID after word {seen} ({seen}.1, ...)")
    return None


def _check_tree(heads: Sequence[int], relations: Sequence[str], where: str) -> None:
    """Each head names a word of the sentence or 0, exactly one word is the root, and the heads form a tree."""
    count = len(heads)
    for index, head in enumerate(heads, start=1):
        if head > count:
            raise ValueError(f"{where}: word {index}'s head is {head}, but the sentence has {count} words")
        if head == index:
            raise ValueError(f"{where}: word {index} is its own head")
    roots = [i for i, h in enumerate(heads, start=1) if h == 0]
    if len(roots) != 1:
        raise ValueError(f"{where} has {len(roots)} root words (HEAD 0); a dependency tree has exactly one")
    for start in range(1, count + 1):
        seen, node = set(), start
        while node != 0:
            if node in seen:
                raise ValueError(f"{where}: the heads of words {sorted(seen)[:6]} go round in a cycle")
            seen.add(node)
            node = heads[node - 1]
    if relations[roots[0] - 1] != "root":
        raise ValueError(f"{where}: word {roots[0]} has HEAD 0 but the relation "
                         f"{relations[roots[0] - 1][:20]!r}; the root's relation is 'root'")


def fingerprint(sentences: Sequence[DependencySentence]) -> str:
    """A short digest of the sentences' words, heads, relations and tags (a cache key for the data)."""
    digest = hashlib.sha256()
    for s in sentences:
        digest.update(repr((s.words, s.heads, s.relations, s.upos)).encode("utf-8"))
    return digest.hexdigest()[:16]
