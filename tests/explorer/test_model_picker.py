"""The model picker's Load: it reports its steps, and a hub download's own tqdm bars reach the browser
(``gr.Progress(track_tqdm=True)``). The hub is a stand-in that records what it was asked; no network."""
from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from tqdm.auto import tqdm

from support.app_helpers import serve
from engine.checkpoints import hub
from explorer.models import picker as model_picker
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from support.probing_helpers import RUN, write_run

pytestmark = pytest.mark.usefixtures("one_thread")


class RecordedProgress:
    """Stands in for ``gr.Progress``: records each ``progress(fraction, desc=...)`` call."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str | None]] = []

    def __call__(self, progress: float, desc: str | None = None, **_: Any) -> None:
        self.calls.append((progress, desc))


def _picker_app(services: Services) -> gr.Blocks:
    with gr.Blocks(analytics_enabled=False) as demo:
        model_picker.build(services)
    return demo


def _load_model(demo: gr.Blocks) -> Any:
    return next(f.fn for f in demo.fns.values() if f.api_name == "load_model")


@pytest.fixture
def checkpoints(tmp_path: Path, tiny_tokenizer) -> Services:
    write_run(tmp_path / "runs", tiny_tokenizer, steps=(2,))
    return Services(tokenizer=tiny_tokenizer, models=ModelRegistry(runs_root=tmp_path / "runs", default_dir=None))


def test_load_model_tracks_tqdm(checkpoints: Services) -> None:
    """Gradio forwards every tqdm bar opened during the call (huggingface_hub's downloads use tqdm)."""
    default = inspect.signature(_load_model(_picker_app(checkpoints))).parameters["progress"].default
    assert isinstance(default, gr.Progress) and default.track_tqdm is True


def test_a_local_load_reports_its_steps(checkpoints: Services) -> None:
    progress = RecordedProgress()
    key = f"checkpoint:{RUN}/step-000002"
    picker, info = _load_model(_picker_app(checkpoints))(key, progress=progress)
    assert picker["value"] == key and "Heads:" in info
    assert progress.calls == [(0.0, "Finding the model…"), (0.1, "Reading the weights…"), (1.0, "Loaded")]


def test_a_hub_download_shows_its_tqdm_bars_in_the_app(checkpoints: Services, monkeypatch: pytest.MonkeyPatch,
                                                       no_internet: list[str]) -> None:
    """Served app, a stand-in hub download that reports through tqdm as huggingface_hub does: the client
    sees the step and the file's bar while the load runs."""
    folder = checkpoints.registry().folder(f"checkpoint:{RUN}/step-000002")
    asked: list[tuple[str, int]] = []

    def download(repo_id: str, max_bytes: int, **_: Any) -> Path:
        asked.append((repo_id, max_bytes))
        for _ in tqdm(range(4), desc="model.safetensors"):
            time.sleep(0.3)
        return folder

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "download", download)
    seen: set[str] = set()
    with serve(_picker_app(checkpoints)) as client:
        job = client.submit("owner/tiny-bert", api_name="/load_model")
        while not job.done():
            seen.update(unit.desc or "" for unit in job.status().progress_data or [])
            time.sleep(0.05)
        picker, info = job.result()
    assert picker["value"] == "hub:owner/tiny-bert" and "Heads:" in info
    assert asked == [("owner/tiny-bert", checkpoints.registry().max_download_bytes)]
    assert "model.safetensors" in seen, seen            # the download's own bar, through track_tqdm
