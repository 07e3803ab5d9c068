"""The SQuAD v1.1 metric (docs/ARCHITECTURE.md, "Extractive QA rules"): the official
normalisation, exact match and token F1 (max over gold answers), means x 100 over a dataset
in any of the accepted shapes."""
from __future__ import annotations

import pytest

from engine.probes.squad_metric import evaluate, exact_match_score, f1_score, max_over_ground_truths, normalize_answer


@pytest.mark.parametrize("text,normal", [
    ("The Cat!", "cat"),
    ("  A  quick,\tbrown   fox. ", "quick brown fox"),
    ("an apple and THE pear", "apple and pear"),
    ("theory of another", "theory of another"),       # articles only as whole words
    ("The-Cat", "thecat"),                            # punctuation removed, not replaced by a space
    ("Hello, World's end", "hello worlds end"),
    ("a an the", ""),
    ("", ""),
])
def test_normalisation(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match():
    assert exact_match_score("The Cat!", "cat") == 1.0
    assert exact_match_score("cats", "cat") == 0.0
    assert max_over_ground_truths(exact_match_score, "cat", ["dog", "The cat", "a mouse"]) == 1.0
    assert max_over_ground_truths(exact_match_score, "cat", ["dog", "mouse"]) == 0.0


def test_f1_by_hand():
    # prediction -> cat sat on mat (4 tokens), gold -> cat sat (2); 2 in common: P 1/2, R 1 -> F1 2/3
    assert f1_score("the cat sat on the mat", "a cat sat") == pytest.approx(2 / 3)
    # repeated tokens count at most as often as in the other side: P 1/3, R 1 -> 1/2
    assert f1_score("cat cat cat", "the cat") == pytest.approx(0.5)
    # P 2/3, R 2/4 -> 2 * (2/3) * (1/2) / (2/3 + 1/2) = 4/7
    assert f1_score("Denver Broncos won", "the Denver Broncos team lost") == pytest.approx(4 / 7)
    assert f1_score("Cat!", "the cat") == 1.0
    assert f1_score("dog", "cat") == 0.0
    assert max_over_ground_truths(f1_score, "broncos", ["Denver Broncos", "Broncos"]) == 1.0
    assert max_over_ground_truths(f1_score, "denver", ["Denver Broncos", "Carolina"]) == pytest.approx(2 / 3)


def test_empty_prediction():
    assert exact_match_score("", "cat") == 0.0 and f1_score("", "cat") == 0.0
    # v1.1 as the official script: both empty after normalisation is an exact match but F1 0
    assert exact_match_score("", "the") == 1.0 and f1_score("", "the") == 0.0
    assert max_over_ground_truths(f1_score, "cat", []) == 0.0


def test_evaluate_on_pairs_and_unanswered():
    golds = [("q1", ["Denver Broncos", "Broncos"]), ("q2", ["the cat"]), ("q3", ["Paris"]), ("q4", ["blue"])]
    predictions = {"q1": "Denver Broncos", "q2": "cat sat", "q3": "London"}   # q4 unanswered scores 0
    result = evaluate(predictions, golds)
    assert set(result) == {"exact_match", "f1"}
    assert result["exact_match"] == pytest.approx(100 * 1 / 4)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3) / 4)     # q2: P 1/2, R 1 -> 2/3


def test_evaluate_accepts_squad_json_and_mappings():
    dataset = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "...", "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "The Eiffel Tower", "answer_start": 0},
                                                 {"text": "Eiffel Tower", "answer_start": 4}]},
        {"id": "b", "question": "?", "answers": [{"text": "1889", "answer_start": 9}]},
    ]}]}]}
    predictions = {"a": "eiffel tower.", "b": "in 1889"}
    expected = {"exact_match": 50.0, "f1": pytest.approx(100 * (1 + 2 / 3) / 2)}
    assert evaluate(predictions, dataset) == expected
    assert evaluate(predictions, dataset["data"]) == expected
    assert evaluate(predictions, {"a": ["Eiffel Tower"], "b": "1889"}) == expected
    hf_rows = {"a": {"text": ["Eiffel Tower"], "answer_start": [4]}, "b": {"text": ["1889"], "answer_start": [9]}}
    assert evaluate(predictions, hf_rows) == expected


def test_evaluate_errors():
    with pytest.raises(ValueError, match="no questions"):
        evaluate({}, [])
    with pytest.raises(TypeError, match="must be a str"):
        evaluate({"a": 3}, [("a", ["x"])])
