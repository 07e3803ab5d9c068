"""BERT's Table 7 at a tiny scale: every arm uses one pretrained model per seed (one run folder per seed, not one
per arm), fine-tuning and the frozen-feature arms are measured on it, and the claims get computed verdicts; arms
whose pretraining differs never share."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.experiments.builtin import experiment
from engine.experiments.builtin_table7 import BERT_TABLE7
from engine.experiments.results import table, verdict
from engine.experiments.runner import experiment_dir, pretrain_dir, pretraining_owner, run_experiment, seed_dir

pytestmark = pytest.mark.usefixtures("one_thread")
ARMS = ["fine-tune", "embeddings", "concat-last-4"]


def test_arms_of_the_same_pretraining_share_one_run_per_seed(tmp_path: Path) -> None:
    scale = BERT_TABLE7.scale(True, steps=8, seeds=2, max_documents=30, eval_documents=5, downstream_steps=4)
    table7 = dataclasses.replace(BERT_TABLE7, extra_metrics=())    # NER's classifiers: test_named_entities.py
    found = run_experiment(tmp_path, table7, scale, lambda message: None, arms=ARMS)
    assert [(r.arm, r.seed) for r in found] == [(a, s) for s in (0, 1) for a in ARMS]
    runs = sorted(experiment_dir(tmp_path, BERT_TABLE7, scale).rglob("pretrain"))
    owner = BERT_TABLE7.arm("fine-tune")
    assert runs == [seed_dir(tmp_path, BERT_TABLE7, owner, seed, scale) / "pretrain" for seed in (0, 1)]
    for arm in ARMS[1:]:
        assert pretrain_dir(tmp_path, BERT_TABLE7, BERT_TABLE7.arm(arm), 1, scale) == runs[1]
        folder = seed_dir(tmp_path, BERT_TABLE7, BERT_TABLE7.arm(arm), 0, scale)
        assert [p.name for p in folder.iterdir()] == ["results.json"]          # no run of its own
    for seed in (0, 1):
        mine = [r for r in found if r.seed == seed]
        assert len({r.metrics["masked_acc"] for r in mine}) == 1                # one model: one masked accuracy
        assert all(0.0 <= r.metrics["pos_acc"] <= 1.0 for r in mine)
        assert [r.metrics["sentiment_acc"] is None for r in mine] == [False, True, True]
    assert all(verdict(found, BERT_TABLE7, i).split(" (")[0] in
               ("reproduced at this scale", "not reproduced", "within the seeds' spread")
               for i in range(len(BERT_TABLE7.claims)))
    assert "| features: the embeddings | 91.0 |" in table(BERT_TABLE7, scale, found)


def test_arms_whose_pretraining_differs_never_share() -> None:
    table5 = experiment("bert-table5")
    assert [pretraining_owner(table5, arm).name for arm in table5.arms] == ["mlm-nsp", "mlm", "ltr"]
    assert {pretraining_owner(BERT_TABLE7, arm).name for arm in BERT_TABLE7.arms} == {"fine-tune"}
