"""Build the bundled sentence-pair sample (``assets/examples/qnli-squad-sample.csv``) from SQuAD v1.1, as QNLI was
built from SQuAD (Wang et al. 2018, GLUE): a question, a sentence of its paragraph, and whether that sentence holds
the answer (``entailment``) or not (``not_entailment``).

    python scripts/make_qnli_sample.py --source ../shared/data/squad/train-v1.1-recovered.json

Deterministic (no randomness but a seeded ``random.Random``). Articles and paragraphs in file order; from each
paragraph at most one question, the first that is usable; at most ``--per-article`` paragraphs of an article, until
``--count`` pairs. A question is usable when its answer text occurs exactly once in its paragraph and lies inside one
sentence of it (the engine's sentence splitter), that sentence and at least one other that does not contain the
answer (case-insensitively) are short enough, and the question is. Every usable question is taken whatever its
label will be; the label alternates (the first ``entailment``), so the sample is balanced to one pair: an
``entailment`` pair carries the sentence that holds the answer, a ``not_entailment`` pair one of the other short
sentences (a seeded choice). Each question and sentence appears once, so a random held-out split shares none with
the training part. Columns: ``text`` (question), ``text_pair`` (sentence), ``label``, and, for checking and
attribution, ``answer`` (the question's SQuAD answer), ``article`` (its Wikipedia article) and ``id`` (its question
id in the source file); the classification reader ignores the last three.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import random
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.text.sentences import split_sentences  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "assets" / "examples" / "qnli-squad-sample.csv"
ENTAILMENT, NOT_ENTAILMENT = "entailment", "not_entailment"
COLUMNS = ("text", "text_pair", "label", "answer", "article", "id")


@dataclass(frozen=True)
class Limits:
    """How short a question and a sentence must be (in words), and how many pairs to take, how spread out."""

    count: int = 1000
    per_article: int = 3
    min_question_words: int = 4
    max_question_words: int = 12
    min_sentence_words: int = 6
    max_sentence_words: int = 18
    seed: int = 47


@dataclass(frozen=True)
class Pair:
    """One row of the sample."""

    question: str
    sentence: str
    label: str
    answer: str
    article: str
    qid: str


def holds_answer(sentence: str, answer: str) -> bool:
    """Whether ``sentence`` contains the answer text (case-insensitively, whitespace collapsed): the test of an
    ``entailment`` pair, and its absence a ``not_entailment`` one's."""
    def norm(text: str) -> str:
        return " ".join(text.split()).casefold()
    return bool(answer.strip()) and norm(answer) in norm(sentence)


def _words(text: str) -> int:
    return len(text.split())


def candidates(context: str, qa: Mapping[str, Any], limits: Limits) -> tuple[str, list[str]] | None:
    """The sentence of ``context`` that holds the question's answer and the short sentences that do not, or None
    when the question is not usable (answer repeated or across sentences, sentences or question too long)."""
    answers = qa.get("answers") or []
    question = " ".join(str(qa.get("question", "")).split())
    if len(answers) != 1 or not limits.min_question_words <= _words(question) <= limits.max_question_words:
        return None
    answer = str(answers[0].get("text", ""))
    if not answer.strip() or " ".join(context.split()).casefold().count(" ".join(answer.split()).casefold()) != 1:
        return None
    sentences = split_sentences(context)
    holding = [s for s in sentences if holds_answer(s, answer)]
    short = [s for s in sentences if limits.min_sentence_words <= _words(s) <= limits.max_sentence_words]
    if len(holding) != 1 or holding[0] not in short:
        return None
    others = [s for s in short if not holds_answer(s, answer)]
    return (holding[0], others) if others else None


def build(squad: Mapping[str, Any], limits: Limits = Limits()) -> list[Pair]:
    """The sample's pairs, in order (see the module's docstring)."""
    rng = random.Random(limits.seed)
    pairs: list[Pair] = []
    for article in squad.get("data", []):
        taken = 0
        for paragraph in article.get("paragraphs", []):
            if taken >= limits.per_article or len(pairs) >= limits.count:
                break
            pair = _first_usable(paragraph, str(article.get("title", "")), len(pairs), limits, rng)
            if pair is not None:
                pairs.append(pair)
                taken += 1
        if len(pairs) >= limits.count:
            break
    return pairs


def _first_usable(paragraph: Mapping[str, Any], title: str, index: int, limits: Limits,
                  rng: random.Random) -> Pair | None:
    context = str(paragraph.get("context", ""))
    for qa in paragraph.get("qas", []):
        found = candidates(context, qa, limits)
        if found is None:
            continue
        holding, others = found
        other = rng.choice(others)                      # drawn for every pair, so the draws do not hang on labels
        label = ENTAILMENT if index % 2 == 0 else NOT_ENTAILMENT
        return Pair(" ".join(str(qa["question"]).split()), holding if label == ENTAILMENT else other, label,
                    " ".join(str(qa["answers"][0]["text"]).split()), title.replace("_", " "), str(qa.get("id", "")))
    return None


def as_csv(pairs: list[Pair]) -> str:
    """The pairs as the bundled CSV (header ``text,text_pair,label,answer,article,id``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows((p.question, p.sentence, p.label, p.answer, p.article, p.qid) for p in pairs)
    return out.getvalue()


def rows(text: str) -> Iterator[dict[str, str]]:
    """The bundled CSV's rows by column name."""
    yield from csv.DictReader(io.StringIO(text))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="../shared/data/squad/train-v1.1-recovered.json")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--count", type=int, default=Limits.count)
    parser.add_argument("--per-article", type=int, default=Limits.per_article)
    args = parser.parse_args(argv)
    if not Path(args.source).is_file():
        raise SystemExit(f"{args.source} is not a file: give --source, the SQuAD v1.1 training set's JSON")
    squad = json.loads(Path(args.source).read_text(encoding="utf-8"))
    pairs = build(squad, Limits(count=args.count, per_article=args.per_article))
    if len(pairs) < args.count:
        raise SystemExit(f"only {len(pairs)} usable questions for {args.count} pairs: raise --per-article")
    Path(args.out).write_text(as_csv(pairs), encoding="utf-8")
    articles = len({p.article for p in pairs})
    print(f"{args.out}: {len(pairs)} pairs ({sum(p.label == ENTAILMENT for p in pairs)} entailment) "
          f"from {articles} articles")


if __name__ == "__main__":
    main()
