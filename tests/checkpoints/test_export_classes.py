"""Every class an export names in ``architectures`` loads in transformers 5: for every task's model (the heads
each training task gives a start model, with 2 and 17 labels), each named class loads with no missing key, no
unexpected key of its own heads, no size mismatch and our numbers. A head transformers sizes by num_labels (QA)
is named only when the labels fit it; its weights stay in the file either way."""
from __future__ import annotations

import json

import pytest

import engine
from engine.model.loaded_model import LoadedModel
from engine.checkpoints.key_mapping import classes_that_load, hf_classes
from engine.model.head_specs import HEADS
from engine.model.heads import BertWithHeads
from engine.training.jobs.models import finetuning_model
from engine.training.tasks.registry import TRAINING_TASKS
from support.checkpoint_helpers import compare, hf_load, ours_model

pytestmark = pytest.mark.usefixtures("no_internet", "one_thread")

# the start models a job meets: a bare encoder, a pretrained MLM + NSP, the bundled default's heads, and the
# default fine-tuned for tagging with 17 labels (the issue's export)
BASES = {"encoder": (), "pretrained": ("mlm", "nsp"), "default": ("mlm", "nsp", "qa"),
         "tagger": ("mlm", "nsp", "qa", "token_classifier")}
TAGS = {i: f"TAG_{i}" for i in range(17)}
TWO = {0: "no", 1: "yes"}
_BUFFERS = ("position_ids", "token_type_ids")


def _labels(count: int) -> dict[int, str]:
    return TWO if count == 2 else TAGS


def _task_model(make_config, task: str, base: str, labels: int) -> BertWithHeads:
    """The model ``task``'s job builds from a start model with the heads ``BASES[base]``."""
    config = make_config(id2label=TAGS) if "token_classifier" in BASES[base] else make_config()
    start = ours_model(config, BASES[base], seed=1)
    if not TRAINING_TASKS[task].finetuning:            # pretraining keeps every head and adds MLM + NSP
        heads = tuple(h for h in HEADS if h in BASES[base] or h in TRAINING_TASKS[task].heads)
        model = BertWithHeads(config, heads=heads)
        model.load_state_dict(start.state_dict(), strict=False)
        return model.eval()
    labelled = HEADS[TRAINING_TASKS[task].heads[0]].labelled
    loaded = LoadedModel(start, None, config, base)
    return finetuning_model(loaded, task, id2label=_labels(labels) if labelled else None, seed=2).eval()


CASES = [(task, base, labels) for task in TRAINING_TASKS for base in BASES for labels in (2, 17)
         if labels == 17 or HEADS[TRAINING_TASKS[task].heads[0]].labelled]


@pytest.mark.parametrize("task, base, labels", CASES, ids=[f"{t}-from-{b}-{n}" for t, b, n in CASES])
def test_every_named_class_of_every_task_export_loads_in_transformers(task, base, labels, make_config, inputs,
                                                                      tmp_path):
    model = _task_model(make_config, task, base, labels)
    out = engine.save(model, None, tmp_path / "export")
    config = json.loads((out / "config.json").read_text())
    named = config["architectures"]
    assert named, "no class named"
    table = hf_classes()
    for hf_class in named:
        hf, info = hf_load(hf_class, out)
        own = tuple(HEADS[h].hf_prefix for h in table[hf_class][0])
        assert [k for k in info["missing_keys"] if not k.endswith(_BUFFERS)] == [], (hf_class, info)
        assert [k for k in info["unexpected_keys"] if k.startswith(own)] == [], (hf_class, info)
        assert not info["mismatched_keys"] and not info["error_msgs"], (hf_class, info)
        compare(model, hf, hf_class, inputs)
    # QA is named exactly when transformers would size its head right; its weights are kept regardless
    if "qa" in model.heads:
        assert ("BertForQuestionAnswering" in named) == (model.config.num_labels == 2
                                                         or not any(HEADS[h].labelled for h in model.heads)), named
    assert engine.load(out).heads == model.heads


def test_the_issues_tagger_export_names_no_question_answering_class(make_config, tmp_path):
    model = _task_model(make_config, "token_classification", "default", 17)
    assert model.heads == ("mlm", "nsp", "qa", "token_classifier")
    out = engine.save(model, None, tmp_path / "tagger")
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining", "BertForTokenClassification"]
    assert len(config["id2label"]) == 17
    back = engine.load(out)
    assert back.heads == model.heads and back.config.num_labels == 17   # the QA weights are still there


def test_naming_a_class_that_cannot_load_beside_another_is_refused(make_config, tmp_path):
    model = ours_model(make_config(id2label=TAGS), ("qa", "token_classifier"), False)
    with pytest.raises(ValueError, match="cannot export as BertForQuestionAnswering beside a 17-label classifier"):
        engine.save(model, None, tmp_path / "out", ["BertForQuestionAnswering", "BertForTokenClassification"])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("classes, labels, loads, unfit, written", [
    (["BertForPreTraining", "BertForQuestionAnswering", "BertForTokenClassification"], 17,
     ["BertForPreTraining", "BertForTokenClassification"], ["BertForQuestionAnswering"], 17),
    (["BertForPreTraining", "BertForQuestionAnswering", "BertForSequenceClassification"], 2,
     ["BertForPreTraining", "BertForQuestionAnswering", "BertForSequenceClassification"], [], 2),
    (["BertForQuestionAnswering"], 17, ["BertForQuestionAnswering"], [], 2),
    (["BertForQuestionAnswering", "BertForMultipleChoice"], 5,
     ["BertForQuestionAnswering", "BertForMultipleChoice"], [], 2),
    (["BertForMaskedLM"], 3, ["BertForMaskedLM"], [], 3),
])
def test_classes_that_load(classes, labels, loads, unfit, written):
    assert classes_that_load(classes, labels) == (loads, unfit, written)
