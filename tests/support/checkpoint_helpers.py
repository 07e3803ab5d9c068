"""Helpers shared by the checkpoint tests: reference models, strict-load checks, file surgery."""
from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file

from engine.model.heads import BertWithHeads
from support.reference import hf_config, max_diff, randomize_


PARITY = 1e-5
ALL_HEADS = ("mlm", "nsp", "qa", "classifier")
THREE_LABELS = {0: "negative", 1: "neutral", 2: "positive"}

# transformers class -> (our heads it carries, has pooler)
HF_CLASSES = {
    "BertModel": ((), True),
    "BertForPreTraining": (("mlm", "nsp"), True),
    "BertForMaskedLM": (("mlm",), False),
    "BertForQuestionAnswering": (("qa",), False),
    "BertForSequenceClassification": (("classifier",), True),
    "BertForNextSentencePrediction": (("nsp",), True),
    "BertForTokenClassification": (("token_classifier",), False),
    "BertForMultipleChoice": (("multiple_choice",), True),
}
LABELLED_CLASSES = ("BertForSequenceClassification", "BertForTokenClassification")   # sized by num_labels


# --- helpers ---------------------------------------------------------------------------

def ours_model(config, heads, add_pooling_layer=None, seed=0) -> BertWithHeads:
    return randomize_(BertWithHeads(config, heads=heads, add_pooling_layer=add_pooling_layer), seed).eval()


@torch.no_grad()
def compare(ours: torch.nn.Module, hf: torch.nn.Module, hf_class: str, inputs: dict) -> dict[str, float]:
    """Largest |ours - transformers| for every output the class has; asserts each <= PARITY.
    ``BertForMultipleChoice`` reads the (B, S) batch as one question with B choices: (1, B, S)."""
    if hf_class == "BertForMultipleChoice":
        inputs = {k: v.unsqueeze(0) for k, v in inputs.items()}                 # (B, S) -> (1, C=B, S)
    mine, theirs = ours(**inputs), hf.eval()(**inputs)
    pairs = {
        "BertModel": [("encoder.last_hidden_state", "last_hidden_state"), ("encoder.pooler_output", "pooler_output")],
        "BertForPreTraining": [("mlm.logits", "prediction_logits"), ("nsp.logits", "seq_relationship_logits")],
        "BertForMaskedLM": [("mlm.logits", "logits")],
        "BertForNextSentencePrediction": [("nsp.logits", "logits")],
        "BertForQuestionAnswering": [("qa.start_logits", "start_logits"), ("qa.end_logits", "end_logits")],
        "BertForSequenceClassification": [("classifier.logits", "logits")],
        "BertForTokenClassification": [("token_classifier.logits", "logits")],
        "BertForMultipleChoice": [("multiple_choice.logits", "logits")],
    }[hf_class]
    diffs = {}
    for our_name, hf_name in pairs:
        a, b = read_output(mine, our_name), getattr(theirs, hf_name)
        assert a is not None, f"our model gave no {our_name}"
        diffs[our_name] = max_diff(a, b)
        assert diffs[our_name] <= PARITY, f"{hf_class}.{hf_name} differs from ours by {diffs[our_name]:.2e}"
    return diffs


def read_output(out, dotted: str):
    """``read_output(out, "mlm.logits")`` is ``out.mlm.logits``, or None when the head did not run."""
    for name in dotted.split("."):
        out = getattr(out, name) if out is not None else None
    return out


def hf_load(hf_class: str, directory: Path):
    model, info = getattr(transformers, hf_class).from_pretrained(directory, output_loading_info=True)
    return model.eval(), info


def assert_strict(info: dict) -> None:
    for name in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        assert not info.get(name), f"transformers reports {name}: {info.get(name)}"


def hf_checkpoint(hf_class: str, config, directory: Path, seed: int = 1):
    """A transformers-made checkpoint (random non-trivial weights) saved with save_pretrained."""
    model = randomize_(getattr(transformers, hf_class)(hf_config(config)), seed).eval()
    model.save_pretrained(directory)
    return model


def write_state(directory: Path, state: dict[str, torch.Tensor], hf_model) -> Path:
    """config.json (from the HF model) + model.safetensors holding ``state`` as given."""
    directory.mkdir(parents=True, exist_ok=True)
    hf_model.config.save_pretrained(directory)
    save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, str(directory / "model.safetensors"))
    return directory


def edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def siblings(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.parent.iterdir())
