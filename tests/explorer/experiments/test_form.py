"""The Experiments tab's description of the chosen experiment (``explorer.experiments.form.describe``)."""
from __future__ import annotations

from engine.experiments.builtin import EXPERIMENTS
from explorer.experiments.form import describe


def test_the_description_names_every_arm_and_which_grow_their_batch() -> None:
    text = describe("roberta-table2")
    assert all(f"`{arm.name}`" in text for arm in EXPERIMENTS["roberta-table2"].arms)
    assert "`sentence-pair` (SENTENCE-PAIR + NSP (one sentence per segment); its batch grows to `segment-pair`'s " \
           "tokens per step)" in text
    assert "`doc-sentences` (DOC-SENTENCES, no NSP (within a document); its batch grows to `full-sentences`'s" in text
    assert "`segment-pair` (SEGMENT-PAIR + NSP (BERT's))" in text                  # the reference keeps its batch
    assert "grows" not in describe("bert-table8") and "Default scale:" in describe("bert-table8")
    assert describe("no-such-experiment") == "There is no experiment 'no-such-experiment'."
