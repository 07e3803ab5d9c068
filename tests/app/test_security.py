"""Security: no pickle or remote code from model files, validated hub ids with allow-listed
downloads, local models confined to the configured folders, and a minimal Gradio file surface."""
from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402
import httpx  # noqa: E402
import huggingface_hub  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from huggingface_hub.utils import filter_repo_objects  # noqa: E402

import app  # noqa: E402
from support.app_helpers import launch  # noqa: E402
from conftest import tiny_config  # noqa: E402
from engine.checkpoints import hf_format as checkpoints  # noqa: E402
from engine.checkpoints import hub  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from explorer.models.registry import ModelRegistry  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "app.py", *sorted((ROOT / "engine").rglob("*.py")), *sorted((ROOT / "explorer").rglob("*.py"))]


class _Boom:
    """Unpickling this runs code: it writes ``marker``. Any loader that unpickles it is unsafe."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def _save_tiny(directory: Path, tokenizer) -> Path:
    torch.manual_seed(0)
    checkpoints.save(BertWithHeads(tiny_config(), heads=("mlm",)), tokenizer, directory)
    return directory


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    return folder


# --- no pickle ------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["torch-zip", "raw-pickle"])
def test_malicious_pytorch_bin_is_never_unpickled(models: Path, tmp_path: Path, tiny_tokenizer, layout: str) -> None:
    folder = _save_tiny(models / "evil", tiny_tokenizer)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "pwned.txt"
    payload = {"bert.embeddings.word_embeddings.weight": _Boom(marker)}
    if layout == "torch-zip":
        torch.save(payload, folder / "pytorch_model.bin")
    else:
        (folder / "pytorch_model.bin").write_bytes(pickle.dumps(payload))
    registry = ModelRegistry(allowed_dirs=(models,), default_dir=None)
    with pytest.raises(ValueError, match="refusing to unpickle|corrupt or unreadable"):
        registry.get(f"local:{folder}")
    with pytest.raises(ValueError):
        checkpoints.load(folder)
    assert not marker.exists()
    # The file really is hostile: a plain unpickler runs its code.
    pickle.loads(pickle.dumps(_Boom(marker)))
    assert marker.read_text() == "pwned"


def test_safetensors_wins_over_a_malicious_bin(models: Path, tmp_path: Path, tiny_tokenizer) -> None:
    folder = _save_tiny(models / "both", tiny_tokenizer)
    marker = tmp_path / "pwned.txt"
    torch.save({"x": _Boom(marker)}, folder / "pytorch_model.bin")
    loaded = ModelRegistry(allowed_dirs=(models,), default_dir=None).get(f"local:{folder}")
    assert loaded.heads == ("mlm",)
    assert not marker.exists()


def test_every_torch_load_is_weights_only_and_nothing_else_unpickles() -> None:
    loads = 0
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        for call in re.finditer(r"torch\.load\(([^)]*)\)", text):
            loads += 1
            assert "weights_only=True" in call.group(1), f"{path.name}: {call.group(0)}"
        assert not re.search(r"pickle\.loads?\(|np\.load\(|allow_pickle\s*=\s*True|joblib|dill", text), path.name
    assert loads >= 1  # the audit saw the .bin reader


# --- no remote code -------------------------------------------------------------------------

def test_no_trust_remote_code_and_no_transformers_auto_classes() -> None:
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"trust_remote_code\s*=\s*True", text), path.name
        assert not re.search(r"^\s*(from|import) transformers", text, re.MULTILINE), path.name


def test_config_with_auto_map_does_not_run_custom_code(models: Path, tmp_path: Path, tiny_tokenizer) -> None:
    folder = _save_tiny(models / "custom", tiny_tokenizer)
    marker = tmp_path / "imported.txt"
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n", encoding="utf-8")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel", "AutoConfig": "modeling_evil.EvilConfig"}
    (folder / "config.json").write_text(json.dumps(config))
    loaded = ModelRegistry(allowed_dirs=(models,), default_dir=None).get(f"local:{folder}")
    assert type(loaded.model) is BertWithHeads
    assert not marker.exists()
    config["model_type"] = "evil"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="model_type 'evil', a family this app does not read"):
        checkpoints.load_directory(folder)
    assert not marker.exists()


# --- hub ids and downloads ------------------------------------------------------------------

@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_internet) -> Iterator[dict[str, Any]]:
    """huggingface_hub's download functions replaced by recorders; the hub looks online."""
    state: dict[str, Any] = {"calls": [], "snapshot": tmp_path / "snapshot"}
    state["snapshot"].mkdir()

    def snapshot_download(repo_id: str, **kwargs: Any) -> str:
        state["calls"].append((repo_id, kwargs))
        return str(state["snapshot"])

    class FakeApi:
        def repo_info(self, repo_id: str, **kwargs: Any) -> object:
            state["calls"].append(("repo_info", repo_id))
            assert kwargs.get("files_metadata") is True     # the sizes, checked before any download
            return SimpleNamespace(siblings=[SimpleNamespace(rfilename="model.safetensors", size=1_000_000)])

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    yield state


REPO_FILES = ["config.json", "model.safetensors", "model-00001-of-00002.safetensors", "model.safetensors.index.json",
              "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
              "pytorch_model.bin", "modeling_bert.py", "configuration_bert.py", "tf_model.h5", "flax_model.msgpack",
              "onnx/model.onnx", "coreml/model.mlmodel", "training_args.bin", "optimizer.pt", "rng_state.pth",
              "setup.sh", ".gitattributes", "README.md", "evil/config.json.py"]
WANTED = {"config.json", "model.safetensors", "model-00001-of-00002.safetensors", "model.safetensors.index.json",
          "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}


def test_download_asks_only_for_config_weights_and_tokenizer(fake_hub: dict[str, Any]) -> None:
    (fake_hub["snapshot"] / "model.safetensors").write_bytes(b"")
    assert hub.download("owner/model") == fake_hub["snapshot"]
    snapshots = [c for c in fake_hub["calls"] if c[0] == "owner/model"]
    assert len(snapshots) == 1
    patterns = snapshots[0][1]["allow_patterns"]
    assert set(filter_repo_objects(REPO_FILES, allow_patterns=patterns)) == WANTED
    assert snapshots[0][1]["local_files_only"] is False


def test_download_falls_back_to_bin_only_without_safetensors(fake_hub: dict[str, Any]) -> None:
    hub.download("owner/legacy")
    snapshots = [c for c in fake_hub["calls"] if c[0] == "owner/legacy"]
    assert len(snapshots) == 2
    second = set(filter_repo_objects(REPO_FILES, allow_patterns=snapshots[1][1]["allow_patterns"]))
    assert second == WANTED | {"pytorch_model.bin"}  # no code, no optimizer or training pickles


BAD_IDS = ["../etc/passwd", "owner/../../secret", "/etc/passwd", "https://huggingface.co/owner/name",
           "owner/name/extra", "owner\\name", "owner name", "", "owner/", "/name", "-owner/name", "owner/.name",
           "owner/name.", "file:///etc/passwd", "owner/na\nme", "a" * 200 + "/b"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_malformed_hub_ids_never_reach_the_hub(fake_hub: dict[str, Any], bad: str) -> None:
    assert not hub.is_hub_id(bad)
    with pytest.raises(ValueError, match="not a hub model id"):
        hub.download(bad)
    with pytest.raises((ValueError, FileNotFoundError)):
        ModelRegistry(default_dir=None).get(f"hub:{bad}")
    assert fake_hub["calls"] == []


# --- local folders --------------------------------------------------------------------------

@pytest.fixture
def outside(tmp_path: Path, tiny_tokenizer) -> Path:
    return _save_tiny(tmp_path / "outside" / "model", tiny_tokenizer)


def test_local_model_inside_allowed_folder_loads(models: Path, tiny_tokenizer) -> None:
    folder = _save_tiny(models / "good", tiny_tokenizer)
    registry = ModelRegistry(allowed_dirs=(models,), default_dir=None)
    assert registry.get(registry.resolve(str(folder))).heads == ("mlm",)


def test_dotdot_cannot_leave_the_allowed_folders(models: Path, outside: Path) -> None:
    registry = ModelRegistry(allowed_dirs=(models,), default_dir=None)
    for text in (f"{models}/../outside/model", f"local:{models}/../outside/model", str(outside)):
        with pytest.raises(ValueError, match="inside the allowed model folders"):
            registry.get(registry.resolve(text))


def test_symlinked_folder_cannot_escape(models: Path, outside: Path) -> None:
    (models / "link").symlink_to(outside, target_is_directory=True)
    registry = ModelRegistry(allowed_dirs=(models,), default_dir=None)
    with pytest.raises(ValueError, match="inside the allowed model folders"):
        registry.get(f"local:{models / 'link'}")


def test_symlinked_file_cannot_escape(models: Path, outside: Path) -> None:
    folder = models / "half"
    shutil.copytree(outside, folder)
    (folder / "vocab.txt").unlink()
    (folder / "vocab.txt").symlink_to(outside.parent.parent / "secret.txt")
    (outside.parent.parent / "secret.txt").write_text("[PAD]\nsecret\n")
    with pytest.raises(ValueError, match="links outside the allowed model folders"):
        ModelRegistry(allowed_dirs=(models,), default_dir=None).get(f"local:{folder}")


def test_symlink_within_allowed_folders_is_fine(models: Path, tiny_tokenizer) -> None:
    real = _save_tiny(models / "real", tiny_tokenizer)
    (models / "alias").symlink_to(real, target_is_directory=True)
    assert ModelRegistry(allowed_dirs=(models,), default_dir=None).get(f"local:{models / 'alias'}").heads == ("mlm",)


# --- what Gradio serves and accepts ---------------------------------------------------------

def test_nothing_is_allowed_and_the_runs_folder_is_blocked(tmp_path: Path) -> None:
    assert app.blocked_paths(Path("runs")) == [str(Path("runs").resolve())]  # inside the working folder too
    elsewhere = Path("/srv/explorer-data/runs")
    assert app.blocked_paths(elsewhere) == [str(elsewhere)]               # never served, wherever it lies
    assert app.blocked_paths(Path(tempfile.gettempdir())) == []           # would block every upload and download
    options = app.launch_options({})
    assert options["allowed_paths"] == [] and options["share"] is False
    assert options["max_file_size"] == app.DEFAULT_MAX_UPLOAD_MB * 1024 * 1024
    assert "server_name" not in options


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """A small app launched with the production launch options (1 MiB upload cap)."""
    with gr.Blocks(analytics_enabled=False) as demo:
        gr.Textbox(label="text")
    options = app.launch_options({"EXPLORER_MAX_UPLOAD_MB": "1"})
    launch(demo, **options)
    try:
        yield demo.local_url
    finally:
        demo.close()


@pytest.mark.parametrize("path", ["/etc/passwd", str(ROOT / "app.py"), str(ROOT / "README.md"),
                                  "../../../../etc/passwd", "/proc/self/environ"])
def test_files_outside_the_cache_are_not_served(served: str, path: str) -> None:
    response = httpx.get(f"{served}gradio_api/file={path}", timeout=30)
    assert response.status_code in (403, 404)  # 404: the client normalised the ../ away from the route
    assert "root:" not in response.text and "PATH=" not in response.text


def test_uploads_are_size_capped(served: str) -> None:
    big = httpx.post(f"{served}gradio_api/upload", files={"files": ("big.txt", b"a" * (1024 * 1024 + 10))},
                     timeout=30)
    assert big.status_code == 413
    small = httpx.post(f"{served}gradio_api/upload", files={"files": ("small.txt", b"hello")}, timeout=30)
    assert small.status_code == 200
    uploaded = small.json()[0]
    assert httpx.get(f"{served}gradio_api/file={uploaded}", timeout=30).text == "hello"
