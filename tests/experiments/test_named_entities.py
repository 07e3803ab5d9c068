"""Named entities as an experiment's metric (BERT's Tables 7 and 8 are about NER): a frozen-feature classifier's
entity F1 is seqeval's on the tags it gives, fine-tuning's is the F1 its run logs, and an arm measured before the
experiment asked for NER gets it measured on its final model without pretraining again."""
from __future__ import annotations

from pathlib import Path

import pytest
from seqeval.metrics import f1_score

from engine.checkpoints.hf_format import load, save
from engine.experiments.definitions import Arm, Experiment, Scale
from engine.experiments.evaluation import DOWNSTREAM, HELD_OUT, final_model, measure
from engine.experiments.features import frozen_feature_f1, frozen_feature_tags
from engine.experiments.runner import run_experiment, seed_dir
from engine.model.heads import BertWithHeads
from engine.model.loaded_model import LoadedModel
from engine.training.runs.run_folder import RunFolder
from support.reference import randomize_

pytestmark = pytest.mark.usefixtures("one_thread")
NER = DOWNSTREAM["ner_f1"][1]
SCALE = Scale(steps=4, seeds=1, max_documents=30, eval_documents=5, vocab_size=600, seq_length=32, batch_size=4,
              downstream_steps=4)


@pytest.fixture(scope="module")
def loaded(make_config, tiny_tokenizer) -> LoadedModel:
    model = randomize_(BertWithHeads(make_config(num_hidden_layers=3), heads=("mlm",)), 11, scale=0.3).eval()
    return LoadedModel(model, tiny_tokenizer, model.config, "tiny, 3 layers")


def animals(tmp_path: Path) -> Path:
    """Sentences whose entities are a function of the word: a classifier on the embeddings can find them all."""
    rows = [("the", "O"), ("cat", "B-animal"), ("sat", "O"), ("on", "O"), ("the", "O"), ("dog", "B-animal")]
    other = [("a", "O"), ("bird", "B-animal"), ("sang", "O"), ("in", "O"), ("the", "O"), ("tree", "O")]
    text = "".join("".join(f"{w}\t{t}\n" for w, t in (rows if i % 2 else other)) + "\n" for i in range(40))
    path = tmp_path / "animals.tsv"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("classifier", ["logistic", "bilstm"])
def test_frozen_feature_f1_is_seqevals_on_the_tags_the_classifier_gives(loaded: LoadedModel, classifier: str,
                                                                      tmp_path: Path) -> None:
    data = animals(tmp_path)
    gold, guessed = frozen_feature_tags(loaded, "embeddings", data, HELD_OUT, 0, classifier)
    assert len(gold) == len(guessed) == 8 and all(len(g) == len(p) for g, p in zip(gold, guessed))
    found = frozen_feature_f1(loaded, "embeddings", data, HELD_OUT, 0, classifier)
    assert found == pytest.approx(f1_score(gold, guessed))
    if classifier == "logistic":                   # a word's embedding names it: every entity is found
        assert found == 1.0


def test_fine_tuned_ner_is_the_f1_its_run_logs_on_the_bundled_posts(loaded: LoadedModel, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    save(loaded.model, loaded.tokenizer, model_dir)
    value = measure(Arm("whole", "fine-tuned"), "ner_f1", model_dir, tmp_path / "ner_f1", SCALE, 0)
    logged = RunFolder(tmp_path / "ner_f1").latest().eval_metrics
    assert 0.0 <= value <= 1.0 and value == logged["eval_entity_f1"]
    assert measure(Arm("f", "features", features="last"), "sentiment_acc", model_dir, tmp_path / "s", SCALE, 0) \
        is None                                    # a frozen-feature arm tags words; it fits no sentence classifier


@pytest.mark.slow                                  # a whole (tiny) experiment, twice
def test_an_arm_measured_before_ner_was_asked_gets_it_without_pretraining_again(tmp_path: Path) -> None:
    arms = (Arm("a", "arm A", features="last"),)
    before = Experiment("ner-toy", "A toy", "nobody", "nothing", arms, (), ())
    after = Experiment("ner-toy", "A toy", "nobody", "nothing", arms, (), (), extra_metrics=("ner_f1",))
    said: list[str] = []
    first = run_experiment(tmp_path, before, SCALE, said.append)
    assert all("ner_f1" not in r.metrics for r in first)
    run = seed_dir(tmp_path, before, arms[0], 0, SCALE) / "pretrain"
    made = final_model(run).stat().st_mtime_ns
    again = run_experiment(tmp_path, after, SCALE, said.append)
    assert final_model(run).stat().st_mtime_ns == made and sum("lacks" in line for line in said) == 1
    final = load(final_model(run))
    for arm, result in zip(arms, again):
        assert result.metrics["ner_f1"] == frozen_feature_f1(final, arm.features, NER, HELD_OUT, 0)
        assert {k: v for k, v in result.metrics.items() if k != "ner_f1"} == \
            next(r for r in first if r.arm == arm.name).metrics
    assert run_experiment(tmp_path, after, SCALE, said.append) == again      # kept: read, not measured again
