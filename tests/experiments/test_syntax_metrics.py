"""The Syntax tab's figures as every arm's metrics: they are the tab's own engine functions' numbers on the same model
and sentences; an arm's results.json written before they existed is still read (measured then when its run is
there, shown as — when it is gone) and a damaged one is measured again; the table, CSV and JSON carry them with the
head and layer they name."""
from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from engine.checkpoints.hf_format import save
from engine.experiments.definitions import METRICS, Arm, Experiment, Scale
from engine.experiments.evaluation import measure
from engine.experiments.results import as_csv, as_json, table
from engine.experiments.runner import ArmResult, read_result, run_experiment, seed_dir
from engine.experiments.syntax_metrics import (SENTENCES, SYNTAX_METRICS, SyntaxMeasures, syntax_measures,
                                               syntax_sentences)
from engine.model.heads import BertWithHeads
from engine.model.loaded_model import LoadedModel
from engine.probes.syntax.conllu import read_sample
from engine.probes.syntax.features import sentence_features
from engine.probes.syntax.heads import head_scores
from engine.probes.syntax.layer_probe import layer_probe
from support.reference import randomize_

pytestmark = pytest.mark.usefixtures("one_thread")
# two arms of frozen features, one model: no fine-tuning run, so a whole experiment takes seconds
EXPERIMENT = Experiment("syntax-toy", "A toy", "nobody", "nothing",
                        (Arm("a", "arm A", features="embeddings"), Arm("b", "arm B", features="last")), (), ())
SCALE = Scale(steps=4, seeds=1, max_documents=30, eval_documents=5, vocab_size=600, seq_length=32, batch_size=4)


@pytest.fixture(scope="module")
def loaded(make_config, tiny_tokenizer) -> LoadedModel:
    config = make_config(num_hidden_layers=3, max_position_embeddings=256)
    model = randomize_(BertWithHeads(config, heads=("mlm",)), 5, scale=0.3).eval()
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny, 3 layers")


@pytest.fixture(scope="module")
def measured(loaded: LoadedModel) -> SyntaxMeasures:
    return syntax_measures(loaded)


def test_the_metrics_are_the_syntax_tabs_own_numbers(loaded: LoadedModel, measured: SyntaxMeasures) -> None:
    sentences = syntax_sentences()
    assert sentences == read_sample()[:SENTENCES]                       # the tab's bundled sample, its first ones
    found = measured
    features = sentence_features(loaded, sentences)                     # what the tab runs on the same model
    rows = head_scores(features).best_heads()
    probe = layer_probe(features)
    assert found.best_head_acc == pytest.approx(np.mean([row["accuracy"] for row in rows]))
    assert found.best_heads == {row["relation"]: [row["layer"], row["head"]] for row in rows}
    assert found.best_head_baseline == pytest.approx(np.mean([row["baseline"] for row in rows]))
    assert found.relations_beaten == sum(row["margin"] > 0 for row in rows)
    assert found.probe_best_layer == probe.best_layer and 0 <= found.probe_best_layer <= 3
    assert found.probe_best_layer_acc == pytest.approx(probe.accuracy[probe.best_layer])
    assert all(1 <= layer <= 3 and 0 <= head < 4 for layer, head in found.best_heads.values())
    assert set(SYNTAX_METRICS) <= set(METRICS) and all(0.0 <= v <= 1.0 for v in found.metrics().values())


def test_every_arm_is_measured_even_one_of_frozen_features(loaded: LoadedModel, measured: SyntaxMeasures,
                                                           tmp_path: Path) -> None:
    model_dir = save(loaded.model, loaded.tokenizer, tmp_path / "model")
    arm = EXPERIMENT.arms[0]
    value = measure(arm, "best_head_acc", model_dir, tmp_path / "unused", SCALE, 0)
    assert value == pytest.approx(measured.best_head_acc, abs=1e-6)
    assert not (tmp_path / "unused").exists()                           # no run of its own


def _strip(kept: Path) -> dict:
    """The results.json as a version without the syntax metrics wrote it."""
    raw = json.loads(kept.read_text(encoding="utf-8"))
    for metric in SYNTAX_METRICS:
        raw["metrics"].pop(metric)
    raw.pop("details")
    kept.write_text(json.dumps(raw), encoding="utf-8")
    return raw


def test_an_old_results_json_is_measured_or_shown_as_missing(tmp_path: Path) -> None:
    said: list[str] = []
    first, second = run_experiment(tmp_path, EXPERIMENT, SCALE, said.append)
    assert set(SYNTAX_METRICS) <= set(first.metrics) and first.details["best_heads"]
    assert isinstance(first.details["probe_best_layer"], int)
    assert sum("best heads and layer probe" in line for line in said) == 1        # one model, measured once
    assert {m: second.metrics[m] for m in SYNTAX_METRICS} == {m: first.metrics[m] for m in SYNTAX_METRICS}
    assert second.details == first.details
    kept = seed_dir(tmp_path, EXPERIMENT, EXPERIMENT.arms[0], 0, SCALE) / "results.json"
    _strip(kept)
    again = run_experiment(tmp_path, EXPERIMENT, SCALE, said.append)     # its run is there: measured, kept
    assert again == [first, second] and any("lacks" in line for line in said)
    assert read_result(kept.parent) == first
    old = _strip(kept)
    shutil.rmtree(kept.parent / "pretrain")                              # the run is gone: nothing to measure
    gone, _ = run_experiment(tmp_path, EXPERIMENT, SCALE, said.append)
    assert gone.metrics == old["metrics"] and gone.details == {}
    text = table(EXPERIMENT, SCALE, [gone])
    assert text.splitlines()[4].endswith("| — | — |")                     # the two syntax columns, last
    assert "Syntax columns" not in text
    raw = json.loads(kept.read_text(encoding="utf-8"))
    kept.write_text(json.dumps({**raw, "details": {"best_heads": {"det": [1, "x"]}}}), encoding="utf-8")
    assert "cannot be read" in str(read_result(kept.parent))             # damaged: measured again, never a crash


def results() -> list[ArmResult]:
    details = {"best_heads": {"det": [2, 1], "nsubj": [1, 0]}, "best_head_baseline": 0.4, "relations_beaten": 1,
               "probe_best_layer": 2}
    return [ArmResult("a", seed, {"masked_acc": 0.2, "pos_acc": 0.8, "sentiment_acc": None, "pair_acc": None,
                                  "best_head_acc": 0.5 + seed / 10, "probe_best_layer_acc": 0.7}, 10, 100, 1000,
                      details={**details, "probe_best_layer": 2 + seed}) for seed in (0, 1)]


def test_the_table_csv_and_json_carry_the_metrics_and_what_they_name() -> None:
    found = results()
    text = table(EXPERIMENT, Scale(steps=10, seeds=2), found)
    assert "ours: syntax: each relation's best attention head, mean accuracy" in text
    assert "| arm A | 20.0 ± 0.0 | 80.0 ± 0.0 | — | — | 55.0 ± 7.1 | 70.0 ± 0.0 |" in text
    assert "averages 40.0" in text and "by seed: arm A 2, 3" in text
    rows = list(csv.DictReader(io.StringIO(as_csv(EXPERIMENT, found))))
    assert float(rows[1]["best_head_acc"]) == 0.6 and float(rows[0]["probe_best_layer_acc"]) == 0.7
    assert rows[1]["probe_best_layer"] == "3" and rows[0]["best_heads"] == "det 2-1; nsubj 1-0"
    whole = json.loads(as_json(EXPERIMENT, Scale(steps=10, seeds=2), found))
    arm = whole["arms"][0]
    assert arm["ours"]["best_head_acc"]["mean"] == pytest.approx(0.55)
    assert arm["seed_details"][1] == {"seed": 1, "best_heads": {"det": [2, 1], "nsubj": [1, 0]},
                                      "best_head_baseline": 0.4, "relations_beaten": 1, "probe_best_layer": 3}
