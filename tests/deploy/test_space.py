"""``python -m deploy``: the files a Space gets (and those it never gets), the refusals, and the Hub calls,
made against a stand-in client that records them. No network: ``no_internet`` guards every test here."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import HfApi, constants
from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS

from deploy import files as deploy_files
from deploy import space
from deploy.files import ALLOW_PATTERNS, IGNORE_PATTERNS, MAX_FILE_BYTES, ROOT, size_text, space_files

pytestmark = pytest.mark.usefixtures("no_internet")

README = "---\ntitle: t\nsdk: gradio\nsdk_version: 6.31.0\napp_file: app.py\n---\n# t\n"
APP = {"app.py": "print('app')\n", "requirements.txt": "gradio==6.31.0\n", "README.md": README,
       "engine/__init__.py": "", "engine/model/encoder.py": "x = 1\n", "explorer/__init__.py": "",
       "explorer/attention/tab.py": "y = 2\n", "assets/style.css": "body {}\n",
       "assets/default-model/config.json": "{}\n"}
# What a working checkout also holds, none of which belongs on a Space.
JUNK = ["runs/run-a/checkpoints/step-000002/model.safetensors", "tests/test_x.py", "bench/inference.py",
        "models/mine/config.json", "test-artifacts/walk.png", ".git/config", "docs/ARCHITECTURE.md",
        "scripts/train.sh", "engine/__pycache__/encoder.cpython-311.pyc", "explorer/attention/tab.pyc",
        "explorer/.ipynb_checkpoints/x.py", ".cache/huggingface/download/x", "data/corpus.txt",
        "CONTRIBUTING.md", "pyproject.toml", "engine/model/encoder.py~", "assets/.DS_Store"]


class StandInHub:
    """Records ``create_repo`` and ``upload_folder`` as ``HfApi`` would receive them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def create_repo(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(("create_repo", args, kwargs))
        return f"https://huggingface.co/spaces/{args[0]}"

    def upload_folder(self, **kwargs: Any) -> str:
        self.calls.append(("upload_folder", (), kwargs))
        return "https://huggingface.co/spaces/owner/name/commit/abc"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A small copy of the app's layout with a 47 MB sparse weights file, and the junk a checkout collects."""
    for name, text in APP.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    for name in JUNK:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("junk", encoding="utf-8")
    weights = tmp_path / "assets/default-model/model.safetensors"
    with weights.open("wb") as f:
        f.truncate(46_800_000)                  # sparse: takes no disk
    return tmp_path


def _run(root: Path, *args: str, **kwargs: Any) -> tuple[int, list[str]]:
    said: list[str] = []
    code = space.main(["--space", "owner/name", *args], root=root, say=said.append, **kwargs)
    return code, said


def test_dry_run_lists_exactly_the_app_files_with_sizes(checkout: Path) -> None:
    code, said = _run(checkout, "--dry-run")
    assert code == 0 and said[-1] == "Dry run: nothing uploaded."
    listed = {line.split()[-1]: line for line in said[1:] if line.startswith(" ")}
    assert set(listed) == set(APP) | {"assets/default-model/model.safetensors"}
    assert listed["assets/default-model/model.safetensors"].split() == ["46.8", "MB",
                                                                        "assets/default-model/model.safetensors"]
    assert listed["app.py"].split()[:2] == ["13", "B"]
    assert said[0] == f"Space owner/name: {len(listed)} files, {size_text(46_800_000 + sum(map(len, APP.values())))}"


def test_the_dry_run_is_what_upload_folder_would_send(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub 2.4.0's own folder listing (``HfApi._prepare_upload_folder_additions``, the step of
    ``upload_folder`` that picks files), given the patterns the deploy passes, adds exactly the listed files.
    Its README check asks the Hub, so it is switched off here."""
    monkeypatch.setattr(HfApi, "_validate_yaml", lambda self, **kwargs: None)
    hub = StandInHub()
    assert space.main(["--space", "owner/name"], api=hub, root=checkout, environ={"HF_TOKEN": "hf_x"},
                      say=lambda line: None) == 0
    sent = hub.calls[1][2]
    adds = HfApi()._prepare_upload_folder_additions(   # upload_folder adds DEFAULT_IGNORE_PATTERNS the same way
        sent["folder_path"], "", allow_patterns=sent["allow_patterns"],
        ignore_patterns=sent["ignore_patterns"] + DEFAULT_IGNORE_PATTERNS)
    assert [op.path_in_repo for op in adds] == [f.path for f in space_files(checkout)]


def test_the_real_checkout() -> None:
    listed = {f.path: f.size for f in space_files(ROOT)}
    weights = ROOT / "assets/default-model/model.safetensors"
    assert listed["assets/default-model/model.safetensors"] == weights.stat().st_size > 40_000_000
    assert {"app.py", "requirements.txt", "README.md", "LICENSE", "engine/model/encoder.py", "explorer/serving/gpu.py",
            "assets/tokenizer/vocab.txt", "assets/style.css", "assets/page.js", "explorer/page.py",
            "assets/LICENSES.md"} <= set(listed)
    assert not [p for p in listed if p.split("/")[0] not in {"app.py", "requirements.txt", "README.md", "LICENSE",
                                                             "engine", "explorer", "assets"}]
    assert not [p for p in listed if "__pycache__" in p or p.endswith(".pyc")]
    assert deploy_files.problems(space_files(ROOT)) == []         # the repository deploys as it is


def test_a_file_over_the_hubs_limit_is_refused(checkout: Path) -> None:
    huge = checkout / "assets/default-model/model-00002-of-00002.safetensors"
    with huge.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)          # sparse: 50 GB on paper, nothing on disk
    hub = StandInHub()
    code, said = _run(checkout, api=hub, environ={"HF_TOKEN": "hf_x"})
    assert code == 1 and hub.calls == []        # refused before any call
    assert said[-2].startswith("refused: 1 problem(s)")
    assert said[-1] == ("  - assets/default-model/model-00002-of-00002.safetensors is 50 GB; the Hub takes at most "
                        "50 GB per file (split it, or keep it out of the Space)")
    assert any(line.startswith("warning: assets/default-model/model-00002") for line in said)


def test_the_limit_is_a_parameter(checkout: Path) -> None:
    code, said = _run(checkout, "--dry-run", max_file_bytes=40_000_000)
    assert code == 1 and "assets/default-model/model.safetensors is 46.8 MB" in said[-1] and "40 MB" in said[-1]


@pytest.mark.parametrize("readme, message", [
    ("# no front matter\n", "README.md has no YAML front matter"),
    (README.replace("sdk: gradio", "sdk: docker"), "sdk: 'docker'; this app needs sdk: gradio"),
    (README.replace("6.31.0", "5.0.0"), "asks for Gradio 5.0.0 but requirements.txt pins 6.31.0"),
    (README.replace("app_file: app.py", "app_file: main.py"), "app_file: main.py, which is not uploaded"),
    (README.replace("sdk: gradio", "sdk: [gradio"), "README.md's front matter is not valid YAML"),
])
def test_a_space_that_would_not_start_is_refused(checkout: Path, readme: str, message: str) -> None:
    (checkout / "README.md").write_text(readme, encoding="utf-8")
    code, said = _run(checkout, "--dry-run")
    assert code == 1 and any(message in line for line in said), said[-3:]


def test_missing_app_file_is_refused(checkout: Path) -> None:
    os.remove(checkout / "requirements.txt")
    code, said = _run(checkout, "--dry-run")
    assert code == 1 and "  - requirements.txt is missing: a Space needs it" in said


def test_upload_calls_the_hub_with_the_token_and_the_patterns(checkout: Path) -> None:
    hub = StandInHub()
    code, said = _run(checkout, "--message", "v1", api=hub, environ={"HF_TOKEN": " hf_secret "})
    assert code == 0 and said[-1].startswith("Uploaded to https://huggingface.co/spaces/owner/name")
    (create, args, create_kwargs), (upload, _, upload_kwargs) = hub.calls
    assert (create, args) == ("create_repo", ("owner/name",))
    assert create_kwargs == {"token": "hf_secret", "repo_type": "space", "space_sdk": "gradio", "exist_ok": True,
                             "private": None}
    assert upload == "upload_folder" and upload_kwargs == {
        "repo_id": "owner/name", "repo_type": "space", "folder_path": str(checkout),
        "allow_patterns": list(ALLOW_PATTERNS), "ignore_patterns": list(IGNORE_PATTERNS), "delete_patterns": ["*"],
        "commit_message": "v1", "token": "hf_secret"}
    _run(checkout, "--private", api=hub, environ={"HF_TOKEN": "t"})
    assert hub.calls[2][2]["private"] is True


def test_without_a_token_or_with_the_hub_off_nothing_is_tried(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = StandInHub()
    code, said = _run(checkout, api=hub, environ={})
    assert code == 2 and hub.calls == [] and said[-1].startswith("error: set HF_TOKEN")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    code, said = _run(checkout, environ={"HF_TOKEN": "t"})      # the real client: stopped before it is made
    assert code == 2 and "HF_HUB_OFFLINE" in said[-1]


@pytest.mark.parametrize("bad", ["owner", "owner/name/extra", "owner/na me", "https://huggingface.co/x/y"])
def test_a_bad_space_id_is_refused(checkout: Path, bad: str) -> None:
    said: list[str] = []
    assert space.main(["--space", bad, "--dry-run"], root=checkout, say=said.append) == 2
    assert said[0].startswith(f"error: {bad!r} is not a Space id")
