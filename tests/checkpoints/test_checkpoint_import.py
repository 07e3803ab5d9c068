"""Loading checkpoints made by transformers: every BERT class, old and foreign key layouts,
weights-only .bin files, fp16, shards."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

import engine
from engine.model.head_specs import HEADS
from support.reference import hf_config, randomize_
from support.checkpoint_helpers import HF_CLASSES, LABELLED_CLASSES, THREE_LABELS, compare, hf_checkpoint, write_state

pytestmark = pytest.mark.usefixtures("no_internet")


# --- import: transformers-made checkpoints here -----------------------------------------

@pytest.mark.parametrize("hf_class", HF_CLASSES)
def test_transformers_checkpoint_loads_with_exactly_its_heads(hf_class, make_config, inputs, tmp_path):
    config = make_config(id2label=THREE_LABELS) if hf_class in LABELLED_CLASSES else make_config()
    hf = hf_checkpoint(hf_class, config, tmp_path / "hf")
    loaded = engine.load(tmp_path / "hf")
    heads, pooler = HF_CLASSES[hf_class]
    assert loaded.heads == heads
    assert loaded.missing_heads == tuple(h for h in HEADS if h not in heads)
    assert loaded.model.has_pooler == pooler
    assert loaded.ignored_keys == []
    assert loaded.tokenizer is None  # save_pretrained of a model writes no tokenizer
    if hf_class in LABELLED_CLASSES:
        assert loaded.config.num_labels == 3 and loaded.config.id2label == THREE_LABELS
    compare(loaded.model, hf, hf_class, inputs)
    if "mlm" in heads:  # the decoder is tied to the word embeddings, as in transformers
        assert loaded.model.cls.predictions.decoder.weight is loaded.model.bert.embeddings.word_embeddings.weight


def _pretraining_state(make_config, tmp_path):
    hf = randomize_(transformers.BertForPreTraining(hf_config(make_config())), 3).eval()
    return hf, {k: v for k, v in hf.state_dict().items()}


def _tf_names(state):
    return {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
            for k, v in state.items()}


def _ddp(state):
    return {f"module.{k}": v for k, v in state.items()}


def _unprefixed_with_explicit_decoder(state):
    out = {k[len("bert."):] if k.startswith("bert.") else k: v for k, v in state.items()}
    out["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    out["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
    return out


def _decoder_bias_only(state):  # very old exports: the MLM bias only under its decoder name
    out = dict(state)
    out["cls.predictions.decoder.bias"] = out.pop("cls.predictions.bias")
    return out


@pytest.mark.parametrize("rekey", [_tf_names, _ddp, _unprefixed_with_explicit_decoder, _decoder_bias_only,
                                   lambda s: _ddp(_tf_names(s))],
                         ids=["tf-gamma-beta", "ddp-module", "unprefixed+decoder", "decoder-bias-only", "ddp+tf"])
def test_old_and_foreign_key_layouts_load_and_match(rekey, make_config, inputs, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    rekeyed = rekey(state)
    assert set(rekeyed) != set(state)
    directory = write_state(tmp_path / "rekeyed", rekeyed, hf)
    loaded = engine.load(directory)
    assert loaded.heads == ("mlm", "nsp") and loaded.model.has_pooler
    compare(loaded.model, hf, "BertForPreTraining", inputs)


def test_pytorch_model_bin_loads_with_weights_only(make_config, inputs, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "bin"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    torch.save({k: v.clone() for k, v in state.items()}, directory / "pytorch_model.bin")
    loaded = engine.load(directory)
    assert loaded.heads == ("mlm", "nsp")
    compare(loaded.model, hf, "BertForPreTraining", inputs)


class _Payload:
    """Unpickling this runs ``os.makedirs(marker)``: a stand-in for arbitrary code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


class _PlainObject:
    def __init__(self) -> None:
        self.x = 1


@pytest.mark.parametrize("payload", ["code", "object"])
def test_pickled_objects_in_bin_are_refused_and_nothing_runs(payload, make_config, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "evil"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    marker = tmp_path / "pwned"
    bad = {k: v.clone() for k, v in state.items()}
    bad["extra"] = _Payload(str(marker)) if payload == "code" else _PlainObject()
    torch.save(bad, directory / "pytorch_model.bin")
    with pytest.raises(ValueError, match="refusing to unpickle"):
        engine.load(directory)
    assert not marker.exists(), "unpickling executed the payload"
    if payload == "code":  # the payload is real: a full unpickle would have run it
        torch.load(directory / "pytorch_model.bin", weights_only=False)
        assert marker.is_dir()


@pytest.mark.parametrize("content", ["list", "non-tensor-values"])
def test_bin_without_a_tensor_state_dict_is_refused(content, make_config, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "odd"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    obj = list(state.values()) if content == "list" else {**{k: v.clone() for k, v in state.items()},
                                                          "bert.embeddings.word_embeddings.weight": 3}
    torch.save(obj, directory / "pytorch_model.bin")
    with pytest.raises(ValueError, match="state dict|tensor"):
        engine.load(directory)


def test_fp16_safetensors_load_as_fp32(make_config, inputs, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    with torch.no_grad():  # the reference holds exactly the fp16-representable values
        for param in hf.parameters():
            param.copy_(param.half().float())
    directory = write_state(tmp_path / "fp16", {k: v.half() for k, v in hf.state_dict().items()
                                                if v.is_floating_point()}, hf)
    assert {v.dtype for v in load_file(str(directory / "model.safetensors")).values()} == {torch.float16}
    loaded = engine.load(directory)
    assert {p.dtype for p in loaded.model.parameters()} == {torch.float32}
    compare(loaded.model, hf, "BertForPreTraining", inputs)


def _write_shards(directory: Path, state: dict[str, torch.Tensor], names=("model-00001-of-00002.safetensors",
                                                                          "model-00002-of-00002.safetensors")):
    keys = sorted(state)
    halves = [keys[: len(keys) // 2], keys[len(keys) // 2:]]
    weight_map = {}
    for name, part in zip(names, halves):
        save_file({k: state[k].detach().clone().contiguous() for k in part}, str(directory / Path(name).name))
        weight_map.update({k: name for k in part})
    total = sum(v.numel() * v.element_size() for v in state.values())
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))


def test_sharded_safetensors_load(make_config, inputs, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "sharded"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    _write_shards(directory, state)
    assert not (directory / "model.safetensors").exists()
    loaded = engine.load(directory)
    assert loaded.heads == ("mlm", "nsp")
    compare(loaded.model, hf, "BertForPreTraining", inputs)


def test_transformers_sharded_save_loads(make_config, inputs, tmp_path):
    hf = randomize_(transformers.BertForQuestionAnswering(hf_config(make_config())), 5).eval()
    hf.save_pretrained(tmp_path / "hf", max_shard_size="20KB")
    assert len(list((tmp_path / "hf").glob("model-*.safetensors"))) >= 2
    loaded = engine.load(tmp_path / "hf")
    assert loaded.heads == ("qa",)
    compare(loaded.model, hf, "BertForQuestionAnswering", inputs)


def test_shard_outside_the_directory_is_refused(make_config, tmp_path):
    hf, state = _pretraining_state(make_config, tmp_path)
    directory = tmp_path / "sharded"
    directory.mkdir()
    hf.config.save_pretrained(directory)
    _write_shards(directory, state, names=("model-00001-of-00002.safetensors", "../outside.safetensors"))
    save_file({"x": torch.zeros(1)}, str(tmp_path / "outside.safetensors"))
    with pytest.raises(ValueError, match="outside"):
        engine.load(directory)
