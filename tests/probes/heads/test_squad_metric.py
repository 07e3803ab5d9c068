"""The SQuAD metrics (docs/design/qa.md): v1.1's official normalisation,
exact match and token F1 (max over gold answers), means x 100 over a dataset in any of the accepted
shapes; v2.0's empty-answer rules, scores at a no-answer threshold and its threshold search, step for
step as ``evaluate-v2.0.py`` (ties included)."""
from __future__ import annotations

import random

import pytest

from engine.probes.heads.squad_metric import (evaluate, evaluate_v2, exact_match_score, exact_v2, f1_score, f1_v2,
                                        max_over_ground_truths, normalize_answer)


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


# ---------------------------------------------------------------------------------------------- SQuAD v2.0
def test_v2_scores_of_empty_answers():
    """v2.0 scores "no answer" as an answer: "" against "" is exact and F1 1; either side empty alone is 0."""
    assert exact_v2("", "") == 1 and f1_v2("", "") == 1.0
    assert f1_v2("", "cat") == 0.0 and f1_v2("cat", "") == 0.0
    assert f1_v2("the", "") == 1.0                                     # "the" normalises to nothing
    assert f1_v2("a cat sat", "the cat sat on the mat") == pytest.approx(2 / 3)   # otherwise as v1.1


V2_GOLD = {"a": ["red"], "b": ["dark blue"], "c": [], "d": []}            # c, d: is_impossible
V2_PREDICTIONS = {"a": "red", "b": "blue", "c": "cat", "d": ""}
V2_NA_PROBS = {"a": 0.1, "b": 0.5, "c": 0.3, "d": 0.9}


def test_v2_at_a_threshold_by_hand():
    """Above the threshold a question counts as answered "": right for c and d, wrong for a and b."""
    at_one = evaluate_v2(V2_PREDICTIONS, V2_GOLD, V2_NA_PROBS)          # default 1.0: every prediction stands
    assert at_one["exact"] == pytest.approx(100 * (1 + 0 + 0 + 1) / 4)
    assert at_one["f1"] == pytest.approx(100 * (1 + 2 / 3 + 0 + 1) / 4)
    assert (at_one["HasAns_exact"], at_one["HasAns_total"]) == (50.0, 2)
    assert at_one["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert (at_one["NoAns_exact"], at_one["NoAns_f1"], at_one["NoAns_total"]) == (50.0, 50.0, 2)
    at_a = evaluate_v2(V2_PREDICTIONS, V2_GOLD, V2_NA_PROBS, threshold=0.1)   # only a keeps its answer
    assert at_a["exact"] == at_a["f1"] == 75.0 and at_a["NoAns_exact"] == 100.0 and at_a["HasAns_f1"] == 50.0


def test_v2_best_threshold_by_hand():
    """The script's walk: 2 (c, d answered "") -> a +1 = 3 at 0.1 -> c -1 -> b (+0 exact, +2/3 F1) -> d +0."""
    result = evaluate_v2(V2_PREDICTIONS, V2_GOLD, V2_NA_PROBS)
    assert (result["best_exact"], result["best_exact_thresh"]) == (75.0, 0.1)
    assert (result["best_f1"], result["best_f1_thresh"]) == (75.0, 0.1)
    # b right too: the walk climbs back to 3 at b but not above, so the first best (0.1) stays
    wider = evaluate_v2({**V2_PREDICTIONS, "b": "dark blue"}, V2_GOLD, V2_NA_PROBS)
    assert (wider["best_exact"], wider["best_exact_thresh"]) == (75.0, 0.1)
    assert (wider["best_f1"], wider["best_f1_thresh"]) == (75.0, 0.1)
    # and c answered "" as well: nothing is lost at c, so b's point is a new best at 0.5
    sure = evaluate_v2({**V2_PREDICTIONS, "b": "dark blue", "c": ""}, V2_GOLD, V2_NA_PROBS)
    assert (sure["best_f1"], sure["best_f1_thresh"]) == (100.0, 0.5)


def test_v2_best_threshold_matches_a_brute_force_search():
    """Without ties, the picked threshold's total is the best over every threshold there is."""
    rng = random.Random(0)
    for _ in range(50):
        ids = [f"q{i}" for i in range(12)]
        gold = {q: (["cat sat"] if rng.random() < 0.5 else []) for q in ids}
        predictions = {q: rng.choice(["cat sat", "cat", "", "dog"]) for q in ids}
        na_probs = {q: rng.random() for q in ids}
        result = evaluate_v2(predictions, gold, na_probs)
        for key in ("exact", "f1"):
            totals = [evaluate_v2(predictions, gold, na_probs, threshold=t)[key]
                      for t in [-1.0, *na_probs.values()]]
            assert result[f"best_{key}"] == pytest.approx(max(totals))
            at_best = evaluate_v2(predictions, gold, na_probs, threshold=result[f"best_{key}_thresh"])[key]
            assert at_best == pytest.approx(max(totals))


def test_v2_ties_are_walked_one_at_a_time_as_the_script_does():
    """x and y share na_prob 0.5: the script counts x alone (2 of 2) though the threshold answers both (1 of 2)."""
    gold, predictions, na_probs = {"x": ["red"], "y": []}, {"x": "red", "y": "cat"}, {"x": 0.5, "y": 0.5}
    result = evaluate_v2(predictions, gold, na_probs)
    assert (result["best_exact"], result["best_exact_thresh"]) == (100.0, 0.5)
    assert evaluate_v2(predictions, gold, na_probs, threshold=0.5)["exact"] == 50.0


def test_v2_gold_answers_and_missing_predictions():
    # a listed answer that normalises to nothing: the question still counts as having an answer
    result = evaluate_v2({"q": ""}, {"q": ["the"]})
    assert result["exact"] == 100.0 and result["HasAns_total"] == 1 and "NoAns_total" not in result
    with pytest.raises(ValueError, match="no prediction"):
        evaluate_v2({"a": "red"}, V2_GOLD)
    with pytest.raises(ValueError, match="no questions"):
        evaluate_v2({}, {})
