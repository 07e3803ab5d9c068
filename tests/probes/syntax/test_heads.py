"""Heads against dependencies on hand-made maps: both directions, ties to the leftmost word, the word itself
never its own head, the root left out, punctuation a word like any other, and the fixed-offset baseline."""
from __future__ import annotations

import numpy as np
import pytest

from engine.probes.syntax.conllu import DependencySentence
from engine.probes.syntax.features import SentenceFeatures
from engine.probes.syntax.heads import (
    DEP_TO_HEAD, HEAD_TO_DEP, head_scores, most_attended, offset_hits, offset_order, relation_counts,
)
from support.syntax_maps import gold_map

# the(det -> cat) cat(nsubj -> sat) sat(root) .(punct -> sat)
THE_CAT = DependencySentence(("the", "cat", "sat", "."), (2, 3, 0, 3), ("det", "nsubj", "root", "punct"),
                             ("DET", "NOUN", "VERB", "PUNCT"), text="the cat sat .")
HEAD_0 = np.array([[.1, .6, .2, .1],      # the -> cat
                   [.1, .1, .7, .1],      # cat -> sat
                   [.1, .3, .1, .3],      # sat -> cat or . (a tie: the leftmost, cat)
                   [.1, .1, .3, .5]])     # . -> itself most, but never itself: sat
HEAD_1 = np.full((4, 4), .25)            # all ties: each word picks the leftmost other word


def features(sentences, maps) -> SentenceFeatures:
    return SentenceFeatures(source="hand", sentences=list(sentences), attention=[np.asarray(m) for m in maps],
                            vectors=[np.zeros((1, len(s), 2)) for s in sentences], num_layers=1, num_heads=2)


def test_most_attended_excludes_the_word_itself_and_ties_go_left() -> None:
    assert most_attended(HEAD_0).tolist() == [1, 2, 1, 2]
    assert most_attended(HEAD_1).tolist() == [1, 0, 0, 0]


def test_accuracy_per_relation_direction_and_head() -> None:
    scores = head_scores(features([THE_CAT], [np.stack([HEAD_0, HEAD_1])[None]]), min_count=1)
    assert scores.relations == ["det", "nsubj", "punct"]           # the root's arc to 0 has no word: left out
    assert scores.counts.tolist() == [1, 1, 1]
    dep_to_head = scores.accuracy[DEP_TO_HEAD][:, 0]                # (R, nh) for the one layer
    head_to_dep = scores.accuracy[HEAD_TO_DEP][:, 0]
    assert dep_to_head.tolist() == [[1, 1], [1, 0], [1, 0]]         # punct: '.' -> sat, head 0 only
    assert head_to_dep.tolist() == [[0, 1], [1, 0], [0, 0]]         # cat -> the (head 1: the leftmost of a tie);
    # sat -> cat (head 0: a tie with ".", the leftmost wins) is right for nsubj and wrong for punct
    assert scores.num_sentences == 1 and scores.num_words == 4
    best = {row["relation"]: row for row in scores.best_heads()}
    assert best["det"] | {"example": ""} == {
        "relation": "det", "count": 1, "direction": DEP_TO_HEAD, "layer": 1, "head": 0, "accuracy": 1.0,
        "baseline": 1.0, "offset": 1, "margin": 0.0, "example": ""}
    assert best["det"]["example"] == "the cat sat ."
    assert scores.beaten() == []                                    # every baseline is right here too


def test_the_fixed_offset_baseline() -> None:
    """Per relation the offset right most often; ties to the smaller |k|, then the negative one; an offset past
    the sentence's ends is wrong; the reverse direction's offset is the mirror image."""
    assert offset_order(2) == [-1, 1, -2, 2]
    # x(obj -> w4) y z w4(root) v(obj -> w4): offsets +3 and -1 each right once
    s = DependencySentence(("x", "y", "z", "w", "v"), (4, 4, 4, 0, 4), ("obj", "amod", "amod", "root", "obj"),
                           ("X",) * 5)
    hits = offset_hits([s], ["obj", "amod"], max_offset=3)
    order = offset_order(3)
    assert {k: hits[DEP_TO_HEAD][0, j] for j, k in enumerate(order) if hits[DEP_TO_HEAD][0, j]} == {-1: 1, 3: 1}
    scores = head_scores(features([s], [np.full((1, 2, 5, 5), .2)]), min_count=1, max_offset=3)
    r = scores.relations.index("obj")
    assert scores.offset[DEP_TO_HEAD][r] == -1 and scores.baseline[DEP_TO_HEAD][r] == 0.5   # -1 before +3
    assert scores.offset[HEAD_TO_DEP][r] == 1 and scores.baseline[HEAD_TO_DEP][r] == 0.5
    a = scores.relations.index("amod")                              # y -> w is +2, z -> w is +1
    assert scores.offset[DEP_TO_HEAD][a] == 1 and scores.baseline[DEP_TO_HEAD][a] == 0.5
    edge = DependencySentence(("a", "b"), (0, 1), ("root", "dep"), ("X", "X"))   # b's head is 1 word left
    far = offset_hits([edge], ["dep"], max_offset=2)[DEP_TO_HEAD][0]
    assert far.tolist() == [1, 0, 0, 0]                             # +1, -2, +2 fall outside: wrong


def test_min_count_and_bad_input() -> None:
    assert relation_counts([THE_CAT], min_count=1) == [("det", 1), ("nsubj", 1), ("punct", 1)]
    assert relation_counts([THE_CAT, THE_CAT], min_count=2) == [("det", 2), ("nsubj", 2), ("punct", 2)]
    with pytest.raises(ValueError, match="no relation has 5 or more arcs"):
        head_scores(features([THE_CAT], [np.stack([HEAD_0, HEAD_1])[None]]), min_count=5)
    scores = head_scores(features([THE_CAT], [np.stack([HEAD_0, HEAD_1])[None]]), min_count=1)
    with pytest.raises(ValueError, match="direction must be one of"):
        scores.best_heads("sideways")
    plain = scores.to_pipeline()
    assert plain["relations"] == ["det", "nsubj", "punct"] and len(plain["best_heads"]) == 3
    assert np.array(plain["accuracy"][DEP_TO_HEAD]).shape == (3, 1, 2)


def test_a_head_that_always_looks_at_the_gold_head_scores_100(make_config) -> None:
    """Maps built from the gold trees: dependent -> head is 100% for every relation, and beats no baseline
    that is also 100%."""
    from engine.probes.syntax.conllu import read_sample

    sentences = read_sample()[:40]
    maps = [np.stack([gold_map(s), gold_map(s).T])[None] for s in sentences]     # head 1: the transpose
    scores = head_scores(features(sentences, maps), min_count=5)
    assert (scores.accuracy[DEP_TO_HEAD][:, 0, 0] == 1).all()
    assert all(row["accuracy"] == 1 for row in scores.best_heads(DEP_TO_HEAD))
    assert set(scores.beaten(DEP_TO_HEAD)) == {r for r, b in zip(scores.relations, scores.baseline[DEP_TO_HEAD]) if b < 1}
