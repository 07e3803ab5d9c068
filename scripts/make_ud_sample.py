"""Cut the bundled Universal Dependencies sample (``assets/ud/en_ewt-sample.conllu``) from UD English EWT.

    python scripts/make_ud_sample.py --source ../shared/data/ud-english-ewt/en_ewt-ud-dev.conllu

Deterministic: the first ``--count`` sentences of the dev split (in file order) whose number of syntactic words
(multiword-token ranges and empty nodes not counted) is between ``--min-words`` and ``--max-words``, each
copied verbatim (comments, multiword tokens and empty nodes included), each checked by the app's reader.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.probes.syntax.conllu import SAMPLE_PATH, parse_conllu  # noqa: E402

HEADER = ("# Universal Dependencies English EWT (dev split), a sample cut by scripts/make_ud_sample.py.\n"
          "# Licence: CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/). See assets/ud/README.md.\n")


def blocks(text: str) -> list[str]:
    """The file's sentence blocks (their lines, without the blank line after)."""
    return [b.strip("\n") for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]


def word_count(block: str) -> int:
    """Syntactic words: lines whose ID is a plain number."""
    return sum(1 for line in block.split("\n") if line and line.split("\t", 1)[0].isdigit())


def cut(text: str, count: int, min_words: int, max_words: int) -> str:
    """The sample: the first ``count`` sentence blocks with ``min_words``..``max_words`` words."""
    kept = [b for b in blocks(text) if min_words <= word_count(b) <= max_words][:count]
    # a newdoc / newpar comment of a sentence left out is not carried over: comments stay with their sentence
    return HEADER + "\n" + "\n\n".join(kept) + "\n\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="../shared/data/ud-english-ewt/en_ewt-ud-dev.conllu")
    parser.add_argument("--out", default=str(SAMPLE_PATH))
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--min-words", type=int, default=5)
    parser.add_argument("--max-words", type=int, default=40)
    args = parser.parse_args(argv)
    sample = cut(Path(args.source).read_text(encoding="utf-8"), args.count, args.min_words, args.max_words)
    sentences = parse_conllu(sample, Path(args.out).name)          # the app's reader accepts every sentence
    Path(args.out).write_text(sample, encoding="utf-8")
    words = sum(len(s) for s in sentences)
    print(f"{args.out}: {len(sentences)} sentences, {words} words")


if __name__ == "__main__":
    main()
