"""A folder's config.json is checked against its weight files and a size cap before memory is spent: a config
claiming a huge model beside small weights is refused with a sentence and allocates nothing big; the checked
weights are put in place as they are (no random init, the MLM decoder tied again)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import engine
from engine.checkpoints.hf_format import load_directory
from engine.checkpoints.model_fit import (
    DEFAULT_MAX_PARAMETERS, ModelTooLargeError, build_on_meta, config_size_lower_bound, parameter_count,
)
from support.checkpoint_helpers import edit_config, ours_model

pytestmark = pytest.mark.usefixtures("no_internet")

REPO = Path(__file__).resolve().parents[2]
RSS_BUDGET_MB = 200

_MEASURE = """
import json, resource, sys, time
from engine.checkpoints.hf_format import load_directory
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    load_directory(sys.argv[1])
    message = ""
except ValueError as exc:
    message = str(exc)
seconds = time.perf_counter() - start
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"message": message, "grown_mb": grown, "seconds": seconds}))
"""


def _load_in_a_fresh_process(directory: Path) -> dict:
    """Load ``directory`` in a new Python; its message and how much its peak RSS grew during the load (MB)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(directory)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def saved(make_config, tmp_path) -> Path:
    """A small MLM + NSP model (64 wide, 2 layers) with a tokenizer-free folder."""
    return engine.save(ours_model(make_config(hidden_size=64), ("mlm", "nsp")), None, tmp_path / "small")


@pytest.mark.parametrize("claim, said", [
    # 2,048 x 16 layers: about 870M parameters, 3.5 GB in fp32 if it were built before the check
    (dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=16, intermediate_size=8192),
     r"incomplete for a 16-layer BERT; missing .* \(config\.json implies 8\d\d\.\dM parameters, the weight files "
     r"hold [\d,]+\)"),
    # ten million positions x 64: 640M parameters, 2.6 GB
    (dict(max_position_embeddings=10_000_000),
     r"position_embeddings\.weight has shape \(64, 64\) but config\.json implies \(10000000, 64\)"),
])
def test_a_config_claiming_a_huge_model_beside_small_weights_is_refused_allocating_nothing(saved, claim, said):
    edit_config(saved, **claim)
    result = _load_in_a_fresh_process(saved)
    assert result["message"], "the folder loaded"
    assert re.search(said, result["message"]), result["message"]
    assert result["grown_mb"] < RSS_BUDGET_MB, result


def test_a_model_over_the_cap_is_refused_and_under_it_loads(saved):
    count = parameter_count(load_directory(saved).model)
    assert load_directory(saved, max_parameters=count).model.heads == ("mlm", "nsp")
    with pytest.raises(ModelTooLargeError, match=f"has {count:,} parameters, over the limit of {count - 1:,}"):
        load_directory(saved, max_parameters=count - 1)
    with pytest.raises(ModelTooLargeError):
        engine.load(saved, max_parameters=1000)


def test_the_config_alone_is_checked_first_even_without_weights(saved):
    (saved / "model.safetensors").unlink()
    edit_config(saved, hidden_size=1024 * 1024, num_attention_heads=16, intermediate_size=4 * 1024 * 1024)
    with pytest.raises(ModelTooLargeError, match=r"config\.json describes a BERT of at least [\d,]+\.\dM parameters, "
                                                 r"over the limit of 2,000\.0M"):
        load_directory(saved)


def test_the_lower_bound_is_exact_integer_arithmetic_for_absurd_sizes(make_config):
    absurd = make_config(vocab_size=10**15, hidden_size=10**9, num_attention_heads=1, intermediate_size=10**9,
                         num_hidden_layers=10**6)
    assert config_size_lower_bound(absurd) > 10**24            # beyond int64: no overflow, nothing built
    small = make_config()
    assert config_size_lower_bound(small) <= parameter_count(build_on_meta(small, ("mlm", "nsp"), True))
    assert config_size_lower_bound(small) < DEFAULT_MAX_PARAMETERS


def test_build_on_meta_spends_no_memory_and_has_the_real_shapes(make_config):
    config = make_config()
    meta = build_on_meta(config, ("mlm", "qa"), False)
    real = ours_model(config, ("mlm", "qa"), False)
    assert all(t.is_meta for t in meta.state_dict().values())
    assert {k: v.shape for k, v in meta.state_dict().items()} == {k: v.shape for k, v in real.state_dict().items()}


def test_loaded_weights_are_the_files_with_the_decoder_tied_and_nothing_on_meta(make_config, tmp_path):
    model = ours_model(make_config(), ("mlm", "nsp", "qa"))
    out = engine.save(model, None, tmp_path / "m")
    loaded = load_directory(out).model
    assert loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.word_embeddings.weight
    assert not any(t.is_meta for t in [*loaded.parameters(), *loaded.buffers()])
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert all(p.requires_grad for p in loaded.parameters())
    ids = torch.tensor([[2, 5, 6, 7, 3]])
    assert torch.equal(loaded(ids).mlm.logits, model(ids).mlm.logits)
    # the tie holds through training: a step on the embeddings moves the decoder with them
    loaded.bert.embeddings.word_embeddings.weight.data[5] += 1.0
    assert torch.equal(loaded.cls.predictions.decoder.weight[5], loaded.bert.embeddings.word_embeddings.weight[5])


def test_weight_files_changed_between_the_check_and_the_read_are_refused(saved, monkeypatch):
    import engine.checkpoints.hf_format as hf_format
    from engine.checkpoints import weight_files

    real = weight_files.each_tensor

    def swap(directory, names):
        for name, tensor in real(directory, names):   # the data read sees another shape than the header read did
            yield name, torch.zeros(3) if name == "bert.pooler.dense.bias" else tensor

    monkeypatch.setattr(hf_format, "each_tensor", swap)
    with pytest.raises(ValueError, match="changed while the model was loading"):
        load_directory(saved)
