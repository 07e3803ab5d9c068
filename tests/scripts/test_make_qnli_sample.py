"""The QNLI-style sample's builder (scripts/make_qnli_sample.py) on a small SQuAD made here: an ``entailment`` pair's
sentence holds its question's answer, a ``not_entailment`` pair's does not, a question whose answer is repeated or
crosses sentences is left out, the labels are balanced, and the CSV it writes is classification data with pairs.
No test reads /work/shared/data."""
from __future__ import annotations

from engine.data.classification import read_classification_file
from scripts.make_qnli_sample import (ENTAILMENT, NOT_ENTAILMENT, Limits, as_csv, build, candidates, holds_answer,
                                      rows)

RIVER = ("The Vell river rises in the northern hills near Ardmore. It flows south for ninety miles to the sea. "
         "Salmon return to the river every autumn to spawn. A stone bridge built in 1820 crosses it at Dunmore.")
BAKERY = ("The bakery on Mill Street opened in 1954. Its first owner was a baker named Ada Price. "
          "Bread from its ovens was sold in three villages. Ada Price retired after forty years of work there.")


def qa(qid: str, question: str, answer: str, context: str) -> dict:
    return {"id": qid, "question": question, "answers": [{"text": answer, "answer_start": context.find(answer)}]}


SQUAD = {"version": "1.1", "data": [
    {"title": "Vell_River", "paragraphs": [
        {"context": RIVER, "qas": [qa("r1", "How far does the Vell river flow?", "ninety miles", RIVER),
                                   qa("r2", "When do the salmon return to the river?", "every autumn", RIVER)]},
        {"context": RIVER, "qas": [qa("r3", "In which year was the stone bridge built?", "1820", RIVER)]},
        {"context": RIVER, "qas": [qa("r4", "Which hills does the river rise in?", "northern hills", RIVER)]}]},
    {"title": "Mill_Street_Bakery", "paragraphs": [
        {"context": BAKERY, "qas": [qa("b1", "Who was the first owner of the bakery?", "Ada Price", BAKERY),
                                    qa("b2", "When did the bakery on Mill Street open?", "1954", BAKERY)]},
        {"context": BAKERY, "qas": [qa("b3", "In how many villages was its bread sold?", "three villages", BAKERY)]}]}]}


def test_every_entailment_sentence_holds_the_answer_and_no_other_does() -> None:
    pairs = build(SQUAD, Limits(count=10, per_article=3, min_sentence_words=4))
    answers = {q["id"]: q["answers"][0]["text"] for a in SQUAD["data"] for p in a["paragraphs"] for q in p["qas"]}
    assert pairs and all(holds_answer(p.sentence, answers[p.qid]) == (p.label == ENTAILMENT) for p in pairs)
    contexts = {q["id"]: p["context"] for a in SQUAD["data"] for p in a["paragraphs"] for q in p["qas"]}
    assert all(p.sentence in contexts[p.qid] for p in pairs)          # a sentence of the question's own paragraph


def test_a_repeated_answer_or_one_across_sentences_is_left_out() -> None:
    limits = Limits(min_sentence_words=4)
    repeated = qa("b1", "Who was the first owner of the bakery?", "Ada Price", BAKERY)    # twice in the paragraph
    assert candidates(BAKERY, repeated, limits) is None
    across = qa("r9", "What comes after Ardmore?", "Ardmore. It flows", RIVER)
    assert candidates(RIVER, across, limits) is None
    holding, others = candidates(RIVER, qa("r1", "How far does the Vell river flow?", "ninety miles", RIVER), limits)
    assert holding == "It flows south for ninety miles to the sea." and holding not in others
    assert not any("ninety miles" in s for s in others)
    too_long = Limits(min_sentence_words=4, max_sentence_words=8)      # the answer's sentence has 9 words
    assert candidates(RIVER, qa("r1", "How far does the Vell river flow?", "ninety miles", RIVER), too_long) is None


def test_labels_alternate_so_the_sample_is_balanced_and_each_question_is_used_once() -> None:
    pairs = build(SQUAD, Limits(count=10, per_article=3, min_sentence_words=4))
    assert [p.label for p in pairs] == [ENTAILMENT, NOT_ENTAILMENT, ENTAILMENT, NOT_ENTAILMENT, ENTAILMENT]
    assert len({p.qid for p in pairs}) == len(pairs)
    assert [p.qid for p in pairs] == ["r1", "r3", "r4", "b2", "b3"]   # one question a paragraph; b1's answer repeats


def test_per_article_and_count_cap_the_sample_and_the_build_is_deterministic() -> None:
    limits = Limits(count=3, per_article=1, min_sentence_words=4)
    pairs = build(SQUAD, limits)
    assert [p.qid for p in pairs] == ["r1", "b2"]                      # one paragraph of each article
    assert build(SQUAD, Limits(count=2, per_article=3, min_sentence_words=4)) == build(
        SQUAD, Limits(count=2, per_article=3, min_sentence_words=4))
    assert len(build(SQUAD, Limits(count=2, per_article=3, min_sentence_words=4))) == 2


def test_the_csv_reads_as_classification_pairs(tmp_path) -> None:
    pairs = build(SQUAD, Limits(count=10, per_article=3, min_sentence_words=4))
    path = tmp_path / "pairs.csv"
    path.write_text(as_csv(pairs), encoding="utf-8")
    examples = read_classification_file(path)
    assert [(e.text, e.text_pair, e.label) for e in examples] == [(p.question, p.sentence, p.label) for p in pairs]
    assert [r["article"] for r in rows(path.read_text(encoding="utf-8"))][:1] == ["Vell River"]
