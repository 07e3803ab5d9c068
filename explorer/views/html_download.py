"""*Download as HTML*: a tab's canvas views as one standalone file (``explorer.views.standalone``), for the answer
the page shows. The button's event takes the views' ``gr.HTML`` values as its inputs (the page sends back what it
holds: no model runs, nothing is recomputed), makes the document with the tab's builder and returns it as a file
named after the view, the model and the input. A click before any answer gets a ``gr.Warning`` sentence.
"""
from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FOLDER = "bert-explorer-exports"        # inside the temp dir of the moment (Gradio serves files only from there)
PREFIX = "html-download-"
MAX_AGE_S = 3600.0                      # older downloads' folders go when a new one is made
NAME_PART = 40                          # characters of the model key and of the input in a file name
BEFORE_ANSWER = "Nothing to download yet: {ask} first, then download the views as HTML."


def name_part(text: Any, limit: int = NAME_PART) -> str:
    """``text`` fit for a file name: letters, digits, ``.``, ``_`` and ``-`` only (runs of anything else, ``..``
    included, become one ``-``), at most ``limit`` characters, never empty or hidden."""
    cleaned = re.sub(r"(?:[^A-Za-z0-9._-]|\.{2,}|-)+", "-", str(text or "")).strip("-.")[:limit].strip("-.")
    return cleaned or "untitled"


def file_name(view: str, model_key: Any, text: Any) -> str:
    """``<view>-<model>-<input>.html``, each part sanitised (``name_part``)."""
    return f"{name_part(view)}-{name_part(model_key or 'default')}-{name_part(text)}.html"


def title(view: str, model_key: Any, text: Any, pair: Any = None) -> str:
    """The document's title: the view, the model and the input (the pair after " | ")."""
    shown = str(text or "").strip()
    if pair and str(pair).strip():
        shown = f"{shown} | {str(pair).strip()}"
    shown = shown if len(shown) <= 80 else shown[:79] + "…"
    return f"{view} · {model_key or 'default'} · “{shown}”"


def fresh_folder(root: Path | None = None, max_age_s: float = MAX_AGE_S) -> Path:
    """A new folder for one download under the temp dir; download folders older than ``max_age_s`` go first
    (Gradio served its own copy of their file long before), so a long-running app does not fill its disk."""
    root = root or Path(tempfile.gettempdir()) / FOLDER
    root.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - max_age_s
    for old in root.glob(f"{PREFIX}*"):
        try:
            if old.is_dir() and not old.is_symlink() and old.stat().st_mtime < cutoff:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue
    return Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))


def write(document: str, name: str, root: Path | None = None) -> str:
    """``document`` written as ``name`` in a fresh folder (``fresh_folder``); its path, for a ``gr.File``."""
    path = fresh_folder(root) / name
    path.write_text(document, encoding="utf-8")
    return str(path)


def handler(view: str, ask: str, make: Callable[..., str], values: int) -> Callable[..., Any]:
    """The click's handler: ``(model_key, text, text_pair, *inputs)`` → the file of ``make(*inputs, title=...)``,
    where the last ``values`` inputs are the views' values (the widgets' settings may come before them); when a
    value is missing (no answer yet), a ``gr.Warning`` ("… {ask} first …") and no file."""
    def download(model_key: str | None, text: str | None, text_pair: str | None, *inputs: Any) -> Any:
        import gradio as gr

        if len(inputs) < values or any(not isinstance(v, dict) for v in inputs[len(inputs) - values:]):
            gr.Warning(BEFORE_ANSWER.format(ask=ask))
            return gr.skip()
        document = make(*inputs, title=title(view, model_key, text, text_pair))
        return write(document, file_name(view, model_key, text))

    return download
