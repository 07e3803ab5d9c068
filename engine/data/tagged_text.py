"""Token-classification files: sentences of words with one tag each, from CoNLL-U or ``word<TAB>tag`` text.

* **CoNLL-U** (Universal Dependencies; a ``.conllu`` file, or any file whose first word line has
  10 tab-separated columns): the tag is the UPOS column (4th). ``#`` lines are comments; a blank
  line ends a sentence; multiword-token lines (ID ``1-2``) and empty nodes (ID ``8.1``) are
  skipped, because their words are listed again one by one and carry the tags.
* **Two columns**: ``word<TAB>tag`` per line (a single space works when the line has no tab), a
  blank line between sentences; ``-DOCSTART-`` lines (CoNLL-2003) and ``#`` comments are skipped. A line that
  starts with ``#`` and holds a tab is a word (a hashtag or the symbol ``#``, as tweets and web text have), not a
  comment. Tags are used as written: part-of-speech tags, or BIO tags (``B-PER``, ``I-PER``, ``O``).

Every ``ValueError`` names the file and the line, says what is wrong and what the line should be.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.data.data_files import read_data_text

CONLLU_COLUMNS = 10
UPOS_COLUMN = 3


@dataclass
class TaggedSentence:
    """The words of one sentence and their tags; ``where`` ("file, line N") for messages."""

    words: list[str]
    tags: list[str]
    where: str = ""


def read_tagged_file(path: str | Path, max_bytes: int | None = None) -> list[TaggedSentence]:
    """The sentences of a CoNLL-U or ``word<TAB>tag`` file (the format is detected).

    ``FileNotFoundError`` for a missing file; ``ValueError`` for one over ``max_bytes``, empty, not
    UTF-8, with a malformed line (naming it), or without a single tagged word.
    """
    path = Path(path)
    text = read_data_text(path, max_bytes, "tagged-words file")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    sentences = (_read_conllu(lines, path.name) if is_conllu(lines, path.name)
                 else _read_two_columns(lines, path.name))
    if not sentences:
        raise ValueError(f"{path.name} has no tagged words: write one word and its tag per line "
                         f"(word<TAB>tag, a blank line between sentences) or use a CoNLL-U file")
    return sentences


def is_conllu(lines: list[str], name: str) -> bool:
    """A ``.conllu`` name, or a first word line with 10 tab-separated columns."""
    if name.lower().endswith(".conllu"):
        return True
    for line in lines:
        if line.strip() and not line.startswith("#"):
            return len(line.split("\t")) == CONLLU_COLUMNS
    return False


class _Sentences:
    """Collects words into sentences; a blank line (or the end) closes the current one."""

    def __init__(self, name: str) -> None:
        self.name, self.done = name, []
        self.words: list[str] = []
        self.tags: list[str] = []
        self.first = 0

    def add(self, word: str, tag: str, number: int) -> None:
        if not self.words:
            self.first = number
        self.words.append(word)
        self.tags.append(tag)

    def close(self) -> None:
        if self.words:
            self.done.append(TaggedSentence(self.words, self.tags, f"{self.name}, line {self.first}"))
        self.words, self.tags = [], []


def _read_conllu(lines: list[str], name: str) -> list[TaggedSentence]:
    sentences = _Sentences(name)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            sentences.close()
            continue
        if line.startswith("#"):
            continue
        columns = line.split("\t")
        where = f"{name}, line {number}"
        if len(columns) != CONLLU_COLUMNS:
            raise ValueError(f"{where}: a CoNLL-U word line has {CONLLU_COLUMNS} tab-separated columns (ID, FORM, "
                             f"LEMMA, UPOS, ...), this one has {len(columns)}; fix the line or save the file as "
                             f"two columns (word<TAB>tag)")
        word_id = columns[0]
        if "-" in word_id or "." in word_id:        # a multiword token (1-2) or an empty node (8.1)
            continue
        if not word_id.isdigit():
            raise ValueError(f"{where}: the ID column is {word_id!r}; a word's ID is a number (1, 2, ...)")
        word, tag = columns[1], columns[UPOS_COLUMN].strip()
        if not word.strip():
            raise ValueError(f"{where}: the FORM column (the word) is empty")
        if not tag or tag == "_":
            raise ValueError(f"{where}: the word {word!r} has no UPOS tag (column 4 is {tag or 'empty'!r}); "
                             f"every word needs a tag")
        sentences.add(word, tag, number)
    sentences.close()
    return sentences.done


def _read_two_columns(lines: list[str], name: str) -> list[TaggedSentence]:
    sentences = _Sentences(name)
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            sentences.close()
            continue
        if (stripped.startswith("#") and "\t" not in line) or stripped.startswith("-DOCSTART-"):
            continue                                # a comment; "#tag<TAB>O" is a hashtag, a word
        columns = line.split("\t") if "\t" in line else stripped.split()
        columns = [c.strip() for c in columns]
        where = f"{name}, line {number}"
        if len(columns) != 2:
            raise ValueError(f"{where}: expected a word and its tag separated by a tab (word<TAB>tag), found "
                             f"{len(columns)} column(s) in {stripped[:60]!r}; keep the word and the tag only, and "
                             f"leave a blank line between sentences")
        word, tag = columns
        if not word or not tag:
            raise ValueError(f"{where}: the {'word' if not word else 'tag'} is empty; write word<TAB>tag")
        sentences.add(word, tag, number)
    sentences.close()
    return sentences.done
