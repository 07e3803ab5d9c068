"""The model's way home (scripts/gpu/parts.py): fp16 export in parts under the device's 16 MiB, a SHA-256
manifest, and joining that trusts nothing: a changed, missing, reordered or extra part, or a tar holding a link
or a path, is refused and nothing is written."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import torch

from engine.checkpoints.hf_format import load_directory
from engine.model.heads import BertWithHeads
import scripts.gpu_assemble as assemble
from scripts.gpu import parts


@pytest.fixture
def exported(tmp_path, make_config, tiny_tokenizer):
    torch.manual_seed(0)
    model = BertWithHeads(make_config(), heads=("mlm", "nsp", "qa"))
    out = tmp_path / "out"
    out.mkdir()
    manifest = parts.export_parts(model, tiny_tokenizer, out, part_bytes=20_000)
    return model, out, manifest


def test_parts_join_into_the_fp16_model(exported, tmp_path):
    model, out, manifest = exported
    assert len(manifest["parts"]) > 1 and all(p["bytes"] <= 20_000 for p in manifest["parts"])
    assert {f["name"] for f in manifest["files"]} >= {"config.json", "model.safetensors", "vocab.txt"}
    parts.join_parts(out, tmp_path / "model")
    loaded = load_directory(tmp_path / "model")
    assert loaded.heads == ("mlm", "nsp", "qa")
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], value.half().float()), name
    assert json.loads((tmp_path / "model" / "config.json").read_text())["dtype"] == "float32"


def test_the_default_model_fits_in_four_parts():
    size = sum(p.stat().st_size for p in (parts.ROOT_MODEL).iterdir())
    assert size < parts.MAX_MODEL_BYTES


@pytest.mark.parametrize("damage", ["changed", "missing", "swapped"])
def test_a_damaged_set_of_parts_is_refused(exported, tmp_path, damage):
    _, out, manifest = exported
    first, second = (out / p["name"] for p in manifest["parts"][:2])
    if damage == "changed":
        first.write_bytes(first.read_bytes()[:-1] + b"!")
    elif damage == "missing":
        second.unlink()
    else:
        a, b = first.read_bytes(), second.read_bytes()
        first.write_bytes(b)
        second.write_bytes(a)
    with pytest.raises(ValueError, match="differs from the manifest|cannot be opened"):
        parts.join_parts(out, tmp_path / "model")
    assert not (tmp_path / "model").exists()


def test_a_manifest_naming_a_path_is_refused(exported, tmp_path):
    _, out, manifest = exported
    manifest["parts"][0]["name"] = "../escape"
    (out / parts.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="names a file it must not"):
        parts.join_parts(out, tmp_path / "model")


def test_an_archive_with_a_link_is_refused(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        link = tarfile.TarInfo("config.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    blob = buffer.getvalue()
    (tmp_path / "model.tar.part-00").write_bytes(blob)
    manifest = {"format": 1, "archive": {"bytes": len(blob), "sha256": parts.sha256(blob)},
                "parts": [{"name": "model.tar.part-00", "bytes": len(blob), "sha256": parts.sha256(blob)}],
                "files": [{"name": "config.json", "bytes": 0, "sha256": parts.sha256(b"")}], "heads": []}
    (tmp_path / parts.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not a plain file"):
        parts.join_parts(tmp_path, tmp_path / "model")
    assert not (tmp_path / "model").exists()


def export_with(tmp_path: Path, make_config, tiny_tokenizer, extra: dict[str, bytes]) -> Path:
    """Parts and a consistent, freshly hashed manifest of an fp16 export with ``extra`` files added beside it."""
    folder, out = tmp_path / "export", tmp_path / "parts"
    out.mkdir()
    parts.export_fp16(BertWithHeads(make_config(), heads=("mlm",)), tiny_tokenizer, folder)
    for name, data in extra.items():
        (folder / name).write_bytes(data)
    parts.write_parts(folder, out, ("mlm",), part_bytes=20_000)
    return out


def pickled() -> bytes:
    buffer = io.BytesIO()
    torch.save({"weight": torch.zeros(2)}, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["pytorch_model.bin", "training_args.bin", "model.pt", "optimizer.pkl", "model.ckpt",
                                  "modeling_bert.py", "model.safetensors.bak", "README.txt"])
def test_a_rehashed_archive_carrying_a_file_the_loader_does_not_read_is_refused(tmp_path, make_config,
                                                                               tiny_tokenizer, name):
    out = export_with(tmp_path, make_config, tiny_tokenizer, {name: pickled()})
    assert name in {f["name"] for f in json.loads((out / parts.MANIFEST).read_text())["files"]}
    for part in out.glob(f"{parts.PART_PREFIX}*"):
        part.unlink()                                      # refused before a part is read
    with pytest.raises(ValueError, match=f"the archive would hold '{name}', which the model loader does not read"):
        parts.join_parts(out, tmp_path / "model")
    assert not (tmp_path / "model").exists()


def test_the_files_of_an_export_and_a_sharded_one_pass(tmp_path, make_config, tiny_tokenizer):
    card = {"README.md": b"# model card\n"}
    out = export_with(tmp_path, make_config, tiny_tokenizer, card)
    parts.join_parts(out, tmp_path / "model")
    assert load_directory(tmp_path / "model").heads == ("mlm",) and (tmp_path / "model" / "README.md").exists()
    parts.check_export_files(["config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                              "model-00002-of-00002.safetensors", "vocab.txt", "tokenizer.json",
                              "tokenizer_config.json", "special_tokens_map.json", "README.md"])


def test_the_assembler_refuses_a_pickle_with_one_sentence(tmp_path, make_config, tiny_tokenizer, capsys):
    out = export_with(tmp_path, make_config, tiny_tokenizer, {"pytorch_model.bin": pickled()})
    data = tmp_path / "data"
    data.mkdir()
    for name in ("wiki_heldout.jsonl", "squad_heldout.json"):
        (data / name).write_text("")
    assert assemble.main(["--parts", str(out), "--out", str(tmp_path / "model"), "--data", str(data)]) == 2
    said = capsys.readouterr().err
    assert "cannot be joined: the archive would hold 'pytorch_model.bin', which the model loader does not read" in said
    assert not (tmp_path / "model").exists()
