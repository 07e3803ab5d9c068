"""The app's canvas views in a notebook (Jupyter, VS Code, Colab), from the same value builders and the same
scripts as the tabs, with no CDN and no server::

    from explorer.notebook import attention_view, embeddings_view, load_model, neuron_view

    model = load_model("default")                 # a folder, a model key the app knows, or a LoadedModel
    attention_view(model, "The cat sat on the mat because it was tired.", layer=3, head=4)

Each function runs the model once for its input and returns a :class:`View`: a notebook shows it inline (an
``<iframe srcdoc>`` holding the standalone document of ``explorer.views.standalone``, so it draws in any output
cell, offline), ``.html`` is that document and ``.save(path)`` writes it as a file. Layers are numbered from 1
(layer 0 is the embeddings' output, which has no attention) and heads from 0, as in the app. Bad input raises a
``ValueError`` with one sentence. No Gradio here.
"""
from __future__ import annotations

import html
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.checkpoints.hf_format import load_directory
from engine.model.loaded_model import LoadedModel
from engine.probes.attention.maps import attention
from engine.probes.attention.neuron_view import neuron_inputs
from engine.probes.representations.embeddings import COMPONENTS, embeddings
from explorer.attention import canvas as attention_canvas
from explorer.attention import documents as attention_documents
from explorer.attention import neuron_canvas
from explorer.embeddings import canvas as embeddings_canvas
from explorer.embeddings import documents as embeddings_documents
from explorer.layer_numbers import head_index
from explorer.models.settings import inference_device
from explorer.views.html_download import title as document_title

DEFAULT_LENGTH = 128            # tokens, specials included (the Attention tab's default)
LENGTHS = (8, 512)              # the Attention tab's range
HEIGHTS = {"attention": 1600, "neuron": 850, "embeddings": 1700}   # the inline frame's height in CSS px

_registry_lock = threading.Lock()
_registry: Any = None


@dataclass(frozen=True)
class View:
    """One standalone document: shown inline by a notebook, saved as a file by :meth:`save`."""

    html: str
    height: int = 900

    def _repr_html_(self) -> str:
        """The document in an ``<iframe srcdoc>`` (its scripts run in Jupyter, VS Code and Colab alike)."""
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" title="BERT Explorer view" '
                f'style="width: 100%; height: {int(self.height)}px; border: 1px solid #e5e7eb;"></iframe>')

    def save(self, path: str | Path) -> Path:
        """Write the document to ``path`` (a ``.html`` file that opens offline in any browser); returns it."""
        path = Path(path).expanduser()
        path.write_text(self.html, encoding="utf-8")
        return path


def load_model(model: str | Path | LoadedModel = "default") -> LoadedModel:
    """``model`` ready to use: a ``LoadedModel`` as it is, a folder in the Hugging Face layout, or a key the app
    knows (``default``, ``untrained``, ``checkpoint:<run>/<step>``, ``hub:<owner/name>``, ...), loaded once."""
    if isinstance(model, LoadedModel):
        return model
    if not isinstance(model, (str, Path)) or not str(model).strip():
        raise ValueError(f"model must be a folder, a model key or a LoadedModel, got {model!r}")
    folder = Path(model).expanduser()
    if isinstance(model, Path) or (folder.is_dir() and str(model) not in ("default", "untrained")):
        return load_directory(folder, inference_device())
    return _models().get(_models().resolve(str(model)))


def _models() -> Any:
    """The app's model registry, made on first use (runs under ``$EXPLORER_RUNS_DIR``; no training worker)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            from explorer.services import make_registry, runs_dir_from_env

            _registry = make_registry(runs_dir_from_env(), None)
        return _registry


def _length(loaded: LoadedModel, max_length: Any) -> int:
    """``max_length`` checked against the tab's range, capped at the model's positions."""
    if isinstance(max_length, bool) or not isinstance(max_length, int) or not LENGTHS[0] <= max_length <= LENGTHS[1]:
        raise ValueError(f"max_length must be a whole number from {LENGTHS[0]} to {LENGTHS[1]}, got {max_length!r}")
    return min(max_length, loaded.config.max_tokens)


def _pair(text: Any, text_pair: Any) -> str | None:
    """Checks the text (a non-empty str); the pair, None when blank."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text must be a non-empty string: type a sentence")
    if text_pair is not None and not isinstance(text_pair, str):
        raise ValueError(f"text_pair must be a string or None, got {type(text_pair).__name__}")
    return text_pair if text_pair and text_pair.strip() else None


def _heads(heads: Any, num_heads: int) -> list[int]:
    """The head view's heads: all when None, else the given ones (each from 0 to ``num_heads`` - 1)."""
    if heads is None:
        return list(range(num_heads))
    try:
        chosen = sorted({int(h) for h in heads})
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"heads must be a list of head numbers from 0 to {num_heads - 1}, got {heads!r}") from None
    wrong = [h for h in chosen if not 0 <= h < num_heads]
    if wrong or not chosen:
        raise ValueError(f"heads {wrong or '[]'} do not exist: this model's layers have heads 0 to {num_heads - 1}")
    return chosen


def attention_view(model: str | Path | LoadedModel, text: str, text_pair: str | None = None, layer: int = 1,
                   head: int = 0, heads: list[int] | None = None, max_length: int = DEFAULT_LENGTH) -> View:
    """The Attention tab's heatmap, head view and model view of ``text`` (and ``text_pair``), starting at
    ``layer`` (from 1) and ``head`` (from 0); ``heads``: those the head view draws (default all)."""
    loaded = load_model(model)
    pair = _pair(text, text_pair)
    config = loaded.config
    index, head = head_index(config.num_hidden_layers, config.num_attention_heads, layer, head)
    length = _length(loaded, max_length)
    result = attention(loaded, text, pair, length)
    view_id = attention_canvas.input_id(loaded.model, text, pair, length)
    values = attention_canvas.values(result, index, head, _heads(heads, result.num_heads), view_id)
    title = document_title("attention", loaded.source, text, pair)
    return View(attention_documents.views_document(*values, title=title), HEIGHTS["attention"])


def neuron_view(model: str | Path | LoadedModel, text: str, text_pair: str | None = None, layer: int = 1,
                head: int = 0, query: int = 0, max_length: int = DEFAULT_LENGTH) -> View:
    """The neuron view of ``text``: the query and key vectors behind one row of head ``head`` of ``layer``
    (from 1), for the ``query``-th token (0 = the first special token); a click in the view picks another."""
    loaded = load_model(model)
    pair = _pair(text, text_pair)
    config = loaded.config
    index, head = head_index(config.num_hidden_layers, config.num_attention_heads, layer, head)
    length = _length(loaded, max_length)
    inputs = neuron_inputs(loaded, text, pair, length)
    if isinstance(query, bool) or not isinstance(query, int) or not 0 <= query < len(inputs.tokens):
        raise ValueError(f"query must be a token position from 0 to {len(inputs.tokens) - 1}, got {query!r}")
    view_id = attention_canvas.input_id(loaded.model, text, pair, length)
    value = neuron_canvas.value(inputs, index, head, query, view_id)
    title = document_title("neuron view", loaded.source, text, pair)
    return View(attention_documents.neuron_document(value, title), HEIGHTS["neuron"])


def embeddings_view(model: str | Path | LoadedModel, text: str, text_pair: str | None = None,
                    component: str = "output") -> View:
    """The Embeddings tab's maps of ``text``: its hidden dimensions (starting at ``component``: word, position,
    segment, sum or output) and the position similarity of the model's learned positions."""
    if component not in COMPONENTS:
        raise ValueError(f"unknown component {component!r}; choose one of {', '.join(COMPONENTS)}")
    loaded = load_model(model)
    pair = _pair(text, text_pair)
    result = embeddings(loaded, text, pair, max_length=min(loaded.config.max_tokens, LENGTHS[1]))
    if component not in result.components:
        raise ValueError(f"this model adds no {component} embedding; it has {', '.join(result.components)}")
    dimensions = embeddings_canvas.dimensions_value(result, component)
    similarity = embeddings_canvas.similarity_value(result.position_similarity)
    title = document_title("embeddings", loaded.source, text, pair)
    return View(embeddings_documents.maps_document(dimensions, similarity, title), HEIGHTS["embeddings"])
