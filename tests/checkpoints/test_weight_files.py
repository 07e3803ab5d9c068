"""The weight files read whole or as headers only: the header read gives the same names, shapes and dtypes
as the full read (single, sharded, fp16 safetensors and a weights-only .bin) with no data; damaged files and
indexes are a ValueError with a sentence."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from engine.checkpoints.weight_files import read_weights


def _state() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {"bert.embeddings.word_embeddings.weight": torch.randn(11, 8, generator=generator).half(),
            "bert.pooler.dense.weight": torch.randn(8, 8, generator=generator),
            "bert.pooler.dense.bias": torch.randn(8, generator=generator).to(torch.bfloat16),
            "step": torch.tensor([3], dtype=torch.int64)}


def _write(directory: Path, layout: str, state: dict[str, torch.Tensor]) -> Path:
    directory.mkdir()
    if layout == "single":
        save_file(state, str(directory / "model.safetensors"))
    elif layout == "sharded":
        keys = sorted(state)
        weight_map = {}
        for number, part in enumerate((keys[:2], keys[2:]), start=1):
            name = f"model-0000{number}-of-00002.safetensors"
            save_file({k: state[k] for k in part}, str(directory / name))
            weight_map.update({k: name for k in part})
        (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    else:
        torch.save(state, directory / "pytorch_model.bin")
    return directory


@pytest.mark.parametrize("layout", ["single", "sharded", "bin"])
def test_headers_give_the_names_shapes_and_dtypes_of_the_data_without_it(layout, tmp_path):
    state = _state()
    directory = _write(tmp_path / layout, layout, state)
    full, headers = read_weights(directory), read_weights(directory, meta=True)
    assert all(t.is_meta for t in headers.values())
    assert not any(t.is_meta for t in full.values())
    described = {k: (tuple(v.shape), v.dtype) for k, v in state.items()}
    assert {k: (tuple(v.shape), v.dtype) for k, v in headers.items()} == described
    assert {k: (tuple(v.shape), v.dtype) for k, v in full.items()} == described
    for key, value in state.items():
        assert torch.equal(full[key], value), key


@pytest.mark.parametrize("index", [{"weight_map": ["a", "b"]}, {"weight_map": {"a": 7}}, {"nothing": 1}, [1, 2]])
@pytest.mark.parametrize("meta", [False, True])
def test_a_malformed_shard_index_is_a_sentence(index, meta, tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="corrupt or unreadable"):
        read_weights(tmp_path, meta=meta)


def test_a_shard_outside_the_folder_is_refused_before_it_is_read(tmp_path):
    save_file({"x": torch.zeros(2)}, str(tmp_path / "elsewhere.safetensors"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../elsewhere.safetensors"}}))
    for meta in (False, True):
        with pytest.raises(ValueError, match="points outside"):
            read_weights(folder, meta=meta)


@pytest.mark.parametrize("meta", [False, True])
def test_a_truncated_safetensors_header_read_is_a_sentence(meta, tmp_path):
    directory = _write(tmp_path / "m", "single", _state())
    data = (directory / "model.safetensors").read_bytes()
    (directory / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupt or unreadable"):
        read_weights(directory, meta=meta)


def test_no_weights_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        read_weights(tmp_path, meta=True)
