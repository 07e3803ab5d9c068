"""``hf_format.save(..., dtype=...)``: the floating weights stored narrower (float16, bfloat16) are the float32 ones
rounded (torch's round-to-nearest-even cast), at about half the bytes; ``config.json`` then says ``"dtype":
"float32"`` as the bundled model's does, so ``transformers`` computes in float32 and agrees with our loader; a value
float16 cannot hold keeps its tensor in float32. ``weight_files.stored_float_dtype`` reads a folder's dtype from the
headers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from engine.checkpoints.hf_format import load_directory, save
from engine.checkpoints.weight_files import stored_float_dtype
from engine.model.heads import BertWithHeads
from support.checkpoint_helpers import assert_strict
from support.reference import PARITY, max_diff, randomize_
from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")


def model(heads: tuple[str, ...] = ("mlm", "nsp", "classifier")) -> BertWithHeads:
    return randomize_(BertWithHeads(tiny_config(), heads=heads), seed=3).eval()


def data_bytes(directory: Path) -> int:
    """The bytes of a ``model.safetensors`` after its header (an 8-byte length, then the JSON header)."""
    path = directory / "model.safetensors"
    with open(path, "rb") as handle:
        header = int.from_bytes(handle.read(8), "little")
    return path.stat().st_size - 8 - header


def inputs() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, tiny_config().vocab_size, (3, 9), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_narrowed_weights_are_the_float32_ones_rounded_at_half_the_size(tmp_path, tiny_tokenizer, dtype):
    ours = model()
    save(ours, tiny_tokenizer, tmp_path / "fp32")
    save(ours, tiny_tokenizer, tmp_path / "narrow", dtype=dtype)
    full, narrow = load_file(tmp_path / "fp32" / "model.safetensors"), load_file(tmp_path / "narrow" / "model.safetensors")
    assert narrow.keys() == full.keys() and {v.dtype for v in full.values()} == {torch.float32}
    for key, value in full.items():
        assert narrow[key].dtype == dtype and torch.equal(narrow[key], value.to(dtype)), key
    assert data_bytes(tmp_path / "narrow") * 2 == data_bytes(tmp_path / "fp32")      # the tensors' bytes halve
    assert stored_float_dtype(tmp_path / "narrow") == dtype and stored_float_dtype(tmp_path / "fp32") == torch.float32


def test_config_says_float32_only_when_the_weights_are_narrowed(tmp_path, tiny_tokenizer):
    ours = model()
    save(ours, tiny_tokenizer, tmp_path / "fp32")
    save(ours, tiny_tokenizer, tmp_path / "fp16", dtype=torch.float16)
    full, narrow = (json.loads((tmp_path / name / "config.json").read_text()) for name in ("fp32", "fp16"))
    assert "dtype" not in full and narrow == {**full, "dtype": "float32"}


def test_transformers_loads_a_float16_checkpoint_as_our_loader_does(tmp_path, tiny_tokenizer):
    ours = model(heads=("mlm", "nsp"))
    save(ours, tiny_tokenizer, tmp_path / "fp16", dtype=torch.float16)
    loaded = load_directory(tmp_path / "fp16").model.eval()
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}          # upcast for compute
    hf, info = transformers.BertForPreTraining.from_pretrained(tmp_path / "fp16", output_loading_info=True)
    assert_strict(info)
    assert hf.dtype == torch.float32                                          # config.json's dtype, not the file's
    with torch.no_grad():
        mine, theirs, before = loaded(**inputs()), hf.eval()(**inputs()), ours(**inputs())
    assert max_diff(mine.mlm.logits, theirs.prediction_logits) <= PARITY
    assert max_diff(mine.nsp.logits, theirs.seq_relationship_logits) <= PARITY
    assert 0 < max_diff(mine.mlm.logits, before.mlm.logits)                   # the weights were rounded


def test_a_value_float16_cannot_hold_keeps_its_tensor_in_float32(tmp_path, tiny_tokenizer):
    ours, key = model(heads=("mlm",)), "cls.predictions.transform.dense.weight"
    with torch.no_grad():
        dict(ours.named_parameters())[key][0, 0] = 1e5                         # float16's largest is 65504
    save(ours, tiny_tokenizer, tmp_path / "fp16", dtype=torch.float16)
    stored = load_file(tmp_path / "fp16" / "model.safetensors")
    assert [k for k, value in stored.items() if value.dtype == torch.float32] == [key] and stored[key][0, 0] == 1e5
    assert all(value.dtype == torch.float16 for k, value in stored.items() if k != key)
    assert dict(load_directory(tmp_path / "fp16").model.named_parameters())[key][0, 0] == 1e5


def test_other_dtypes_are_refused_with_a_sentence(tmp_path, tiny_tokenizer):
    with pytest.raises(ValueError, match="weights are saved in float32, float16 or bfloat16, not torch.float64"):
        save(model(), tiny_tokenizer, tmp_path / "x", dtype=torch.float64)
    assert not (tmp_path / "x").exists()


def test_stored_float_dtype_is_the_one_most_weights_have(tmp_path):
    tmp_path.joinpath("mixed").mkdir()
    save_file({"big": torch.zeros(64, 8, dtype=torch.bfloat16), "small": torch.zeros(8),
               "ids": torch.zeros(100, dtype=torch.int64)}, str(tmp_path / "mixed" / "model.safetensors"))
    assert stored_float_dtype(tmp_path / "mixed") == torch.bfloat16
    tmp_path.joinpath("ints").mkdir()
    save_file({"ids": torch.zeros(3, dtype=torch.int64)}, str(tmp_path / "ints" / "model.safetensors"))
    assert stored_float_dtype(tmp_path / "ints") is None
    assert stored_float_dtype(Path(__file__).resolve().parents[2] / "assets" / "default-model") == torch.float16
