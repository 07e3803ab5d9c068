"""Build the bundled named-entity sample (``assets/examples/ner-wnut17-sample.tsv``) from the WNUT 17 Emerging
Entities training file (CC BY 4.0; ``assets/examples/README.md`` says where it comes from and what changed).

    python scripts/make_ner_sample.py --source wnut17train.conll

Deterministic: the first ``--count`` sentences of the file in its order, read by the engine's own reader
(``engine.data.tagged_text``, so a hashtag is a word and a lone tab ends a sentence), every word and tag as
written, ``word<TAB>tag`` per line and a blank line between sentences. Refuses a tag that is not ``O`` or
``B-``/``I-`` of WNUT's six entity types, and an ``I-`` that does not continue an entity of its type (the file
would be damaged).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.data.tagged_text import TaggedSentence, read_tagged_file  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "assets" / "examples" / "ner-wnut17-sample.tsv"
TYPES = ("person", "location", "group", "creative-work", "corporation", "product")
MAX_SOURCE_BYTES = 4 << 20                          # the training file is 0.5 MB


def check(sentence: TaggedSentence) -> None:
    """Raise ``ValueError`` naming the line for a tag outside WNUT's BIO set or an ``I-`` that continues nothing."""
    before = "O"
    for tag in sentence.tags:
        kind, _, entity = tag.partition("-")
        if tag != "O" and (kind not in ("B", "I") or entity not in TYPES):
            raise ValueError(f"{sentence.where}: the tag {tag!r} is not O or B-/I- of {', '.join(TYPES)}")
        if kind == "I" and before[2:] != entity:
            raise ValueError(f"{sentence.where}: {tag!r} follows {before!r}; an I- tag continues its entity")
        before = tag


def build(sentences: list[TaggedSentence], count: int) -> list[TaggedSentence]:
    """The first ``count`` sentences, each checked."""
    if count < 1 or count > len(sentences):
        raise ValueError(f"count is {count}; the source has {len(sentences)} sentences")
    chosen = sentences[:count]
    for sentence in chosen:
        check(sentence)
    return chosen


def as_tsv(sentences: list[TaggedSentence]) -> str:
    """``word<TAB>tag`` lines, a blank line after each sentence."""
    return "".join("".join(f"{w}\t{t}\n" for w, t in zip(s.words, s.tags)) + "\n" for s in sentences)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="WNUT 17's wnut17train.conll")
    parser.add_argument("--count", type=int, default=1000, help="how many sentences (from the first)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    chosen = build(read_tagged_file(args.source, MAX_SOURCE_BYTES), args.count)
    args.out.write_text(as_tsv(chosen), encoding="utf-8")
    entities = sum(t.startswith("B-") for s in chosen for t in s.tags)
    print(f"{args.out}: {len(chosen)} sentences, {sum(len(s.words) for s in chosen):,} words, {entities:,} entities")


if __name__ == "__main__":
    main()
