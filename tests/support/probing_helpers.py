"""Services for the probing-tab tests: tiny in-memory models pinned in a registry, a run with checkpoints,
and a small app (model picker + one tab) to serve in-process."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import gradio as gr
import torch

from conftest import tiny_config
from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from explorer.models.registry import ModelRegistry
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.runs.state import write_checkpoint
from engine.training.runs.run_folder import CHECKPOINTS_DIR, checkpoint_name
from explorer.models import picker as model_picker
from explorer.services import Services
from support.reference import randomize_

RUN = "run-a"
STEPS = (2, 4, 6)


def tiny_model(seed: int, heads: tuple[str, ...] = ("mlm", "nsp", "qa")) -> BertWithHeads:
    """Random but peaked weights, so top-k orders are clear."""
    torch.manual_seed(seed)
    return randomize_(BertWithHeads(tiny_config(), heads=heads), seed, scale=0.3).eval()


def write_run(runs_root: Path, tokenizer: WordPieceTokenizer, steps: tuple[int, ...] = STEPS,
              run: str = RUN, later_by_s: float = 0.0) -> list[Path]:
    """A training run folder with one complete checkpoint per step (different weights each), written
    now (``created`` one second apart), or ``later_by_s`` seconds from now."""
    paths = []
    for i, step in enumerate(steps):
        path = runs_root / run / CHECKPOINTS_DIR / checkpoint_name(step)
        write_checkpoint(tiny_model(100 + i), tokenizer, path, state={"step": step},
                         info={"step": step, "created": time.time() + later_by_s + i, "metrics": {"mlm_loss": 5.0 - i}})
        paths.append(path)
    return paths


def make_services(tokenizer: WordPieceTokenizer, runs_root: Path | None = None) -> Services:
    """``default``: MLM+NSP+QA heads; ``encoder``: no heads at all; checkpoints from ``runs_root``."""
    registry = ModelRegistry(runs_root=runs_root, default_dir=None)
    full = tiny_model(0)
    registry.pin("default", LoadedModel(full, tokenizer, full.config, "tiny test model"))
    bare = tiny_model(1, heads=())
    registry.pin("encoder", LoadedModel(bare, tokenizer, bare.config, "tiny encoder"))
    return Services(tokenizer=tokenizer, models=registry)


def tab_app(services: Services, build_tab: Callable[[Services, Any], dict]) -> tuple[gr.Blocks, dict]:
    """``small_app`` with one tab, and the widgets its ``build`` returned (for event checks)."""
    widgets: dict = {}
    demo = small_app(services, lambda s, picker: widgets.update(build_tab(s, picker)))
    return demo, widgets


def small_app(services: Services, build_tab: Callable[[Services, Any], Any]) -> gr.Blocks:
    """The model picker and one tab, as build_app lays them out."""
    with gr.Blocks(analytics_enabled=False) as demo:
        picker = model_picker.build(services)
        with gr.Tabs():
            with gr.Tab("Tab"):
                build_tab(services, picker)
        model_picker.wire_page_load(demo, services, picker)
    return demo
