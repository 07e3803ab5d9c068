"""What one page's Embeddings views show, kept per visitor as a small key (``ShownInput``: a few hundred bytes
in the tab's ``gr.State``), never the arrays: a component the page lacks, another token's neighbours or a layer
change find the result again in the bounded forward cache, or recompute it when the cache let it go
(docs/design/forward-cache.md, *Per visitor*). Before, the state held the whole ``EmbeddingsResult`` (about 15 MB
at 512 tokens), one per session, outside every bound. No Gradio here.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.probes.representations.embeddings import EmbeddingsResult, at_layer, embeddings_forward
from explorer.embeddings.canvas import result_id
from explorer.forward_cache import cached
from explorer.services import Services


@dataclass(frozen=True)
class ShownInput:
    """The input a page's views show: the model key, the text and pair, the layer (the engine's index) and its
    result's ``id`` (``canvas.result_id``)."""

    model_key: str
    text: str
    pair: str | None
    layer: int
    result_id: str


MAX_LAYER = 1000                # a layer number past this is a typing error, not a slider left from another model


def parse_layer(layer: float | int | None, num_layers: int) -> int:
    """The layer index 0..num_layers (0 = embedding output); None means the last layer."""
    from explorer.ui_errors import whole_number

    if layer is None:
        return num_layers
    value = whole_number(layer, "Layer", 0, MAX_LAYER)
    if value > num_layers:      # a slider still set for the model picked before (it can have more layers)
        import gradio as gr

        gr.Warning(f"This model has {num_layers} layers: showing the last one ({num_layers}), not {value}.")
        return num_layers
    return value


def compute(services: Services, model_key: str | None, text: str, pair: str | None,
            layer: float | int | None) -> tuple[EmbeddingsResult, ShownInput]:
    """The result at ``layer`` (the engine's forward, once per input while the forward cache keeps it) and the
    key the page keeps for it. Call inside ``services.probing()``."""
    loaded = services.model(model_key)
    index = parse_layer(layer, loaded.config.num_hidden_layers)
    max_length = min(loaded.config.max_tokens, services.max_length)
    forward = cached(services.forward_cache, loaded.model, ("embeddings", text, pair, max_length),
                     lambda: embeddings_forward(loaded, text, pair, layer=index, max_length=max_length))
    result = at_layer(forward, index)            # a layer change reads the kept forward: no model run
    return result, ShownInput(str(model_key or "default"), text, pair, index, result_id(result))


def result_of(services: Services, shown: ShownInput | None) -> EmbeddingsResult | None:
    """The result ``shown`` names, from the forward cache or computed again; None when nothing is shown (or the
    state is not a ``ShownInput``)."""
    if not isinstance(shown, ShownInput):
        return None
    with services.probing():
        result, _ = compute(services, shown.model_key, shown.text, shown.pair, shown.layer)
    return result
