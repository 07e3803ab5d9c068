"""What the Embeddings tab shows, without widgets: every output of its main action for one input (the summary,
the figures, the canvas views' values, the neighbours table, the token choice), the neighbours of another token
or a component the page lacks from the result it holds, and the position similarity over training. Plain
arguments in, figures / tables / Markdown out; bad input raises ``gr.Error`` with one sentence.
``explorer.embeddings.tab`` wires them to its widgets."""
from __future__ import annotations

from typing import Any, Sequence

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from engine.probes.representations.embeddings import COMPONENTS, EmbeddingsResult
from engine.probes.inference import embeddings_over_checkpoints
from explorer.models.choices import ModelChoice
from explorer.models.choices import evenly_spaced as spread
from explorer.embeddings import canvas, shown
from explorer.embeddings import plots as eplots
from explorer.embeddings.sections import (ALL_TOKENS, DEFAULT_OVER_TRAINING_POSITIONS, FIRST_WORD,
                                          OVER_TRAINING_POSITIONS, token_choices)
from explorer.runs.run_picker import run_note
from explorer.plots import empty_figure
from explorer.services import Services
from explorer.ui_errors import check_length, require_text, whole_number
from explorer.views.export_names import export_info
from explorer.views.plot_names import named, named_for

EMPTY_MESSAGE = "Type some text to embed."
MAX_CHECKPOINTS = 6            # small multiples shown over training


def parse_token(value: Any, num_tokens: int) -> int | None:
    """``"all"``/empty -> None; a position ("3" or "3: word") -> 3. Unknown positions -> None with a warning."""
    text = "" if value is None else str(value).strip()
    if text.lower() in ("", ALL_TOKENS, "all tokens"):
        return None
    try:
        position = int(float(text.split(":", 1)[0]))
    except ValueError:
        raise gr.Error(f"Token choice {text!r} is neither 'all' nor a token position.", print_exception=False) from None
    if not 0 <= position < num_tokens:
        gr.Warning(f"Position {position} is not in this input (0..{num_tokens - 1}); showing all tokens.")
        return None
    return position


def first_word(segments: Sequence[str]) -> int | None:
    """The position of the first token that is not a special one ([CLS], [SEP]); None when there is none."""
    return next((i for i, segment in enumerate(segments) if segment != "special"), None)


def chosen_position(value: Any, result: EmbeddingsResult) -> int | None:
    """The position whose neighbours to show: ``FIRST_WORD`` (the default) -> the text's first word, else as
    :func:`parse_token` reads it (None = all tokens)."""
    if str(value if value is not None else "").strip().lower() in (FIRST_WORD, "first word of the text"):
        return first_word(result.segments)
    return parse_token(value, len(result.tokens))


def neighbour_frame(result: EmbeddingsResult, position: int | None) -> pd.DataFrame:
    """The nearest-neighbour table for all tokens or one position."""
    return eplots.neighbours_table(result.tokens, result.neighbour_tokens, result.neighbour_ids.tolist(),
                                   result.neighbour_scores.tolist(), position)


def summary_markdown(result: EmbeddingsResult) -> str:
    """Counts, the LayerNorm check, segment and position facts, repeated words, truncation."""
    counts = {s: result.segments.count(s) for s in ("A", "B", "special")}
    mean = {name: float(values.mean()) for name, values in result.norms.items()}
    where = "the embedding output (layer 0)" if result.layer == 0 else f"layer {result.layer} of {result.num_layers}"
    summands = [name for name in ("word", "position", "segment") if name in result.components]
    formula = " + ".join(summands)
    projected = (f" The embeddings are {result.word.shape[1]} wide; a dense layer projects the output to the hidden "
                 f"size {result.projected_to} before the first layer." if result.projected_to else "")
    lines = [
        f"**{len(result.tokens)} tokens** (A: {counts['A']}, B: {counts['B']}, special: {counts['special']}) · "
        f"embedding size {result.word.shape[1]} · contextual view at {where} · model: {result.source}",
        "Mean norms: " + " · ".join(f"{name} {mean[name]:.3f}" for name in summands) +
        f" · sum {mean['sum']:.3f} · after LayerNorm {mean['output']:.3f}. " + (
            f"Our LayerNorm({formula}) equals the model's own embedding output "
            f"(max difference {result.output_max_diff:.1e})." if result.output_max_diff <= 1e-4 else
            f"⚠️ LayerNorm({formula}) differs from the model's embedding output by up to "
            f"{result.output_max_diff:.2g} (is the model in training mode, with dropout on?).") + projected,
    ]
    if "position" not in result.components:
        lines.append("No position table: this model's positions enter inside attention (ModernBERT turns queries "
                     "and keys by rotary angles; DeBERTa adds relative-position terms to the scores), so the "
                     "position views are empty and the Attention tab shows what positions do.")
    if result.segment_difference_norm is not None:
        lines.append(f"Segments: B's embedding is A's plus one learned vector of norm "
                     f"{result.segment_difference_norm:.3f} (cosine of A and B: {result.segment_cosine:.3f}).")
    sims = result.position_similarity
    if sims.shape[0] > 1:
        adjacent = float(sims.diagonal(1).mean())
        lines.append(f"Positions (first {result.num_positions}): neighbouring positions have mean cosine "
                     f"{adjacent:.3f}; the whole matrix averages {float(sims.mean()):.3f}.")
    for repeat in result.repeats[:3]:
        p, q = repeat.positions[:2]
        lines.append(f"`{repeat.token}` at positions {p} and {q}: same word embedding; cosine "
                     f"{repeat.output_cosine:.3f} after the other summands and the norm, "
                     f"{repeat.contextual_cosine:.3f} at layer {result.layer}.")
    if result.truncated:
        lines.append(f"⚠️ truncated: {result.num_truncated_tokens} tokens dropped at max length "
                     f"{result.max_length}.")
    return "\n\n".join(lines)


def check_component(component: str) -> str:
    """``component`` when it is one of ``COMPONENTS``; else a one-sentence ``gr.Error``."""
    if component not in COMPONENTS:
        raise gr.Error(f"Unknown component {component!r}; choose one of {', '.join(COMPONENTS)}.",
                       print_exception=False)
    return component


def heatmap_value(result: EmbeddingsResult | None, component: str, only: Sequence[str] | None = None) -> Any:
    """The hidden-dimensions canvas view's value (``explorer.embeddings.canvas``) for one component (validated);
    ``gr.skip()`` before any result."""
    check_component(component)
    if result is None:
        return gr.skip()
    if component not in result.components:          # DistilBERT: no segment table
        gr.Warning(f"This model adds no {component} embedding (it adds {', '.join(result.components[:-2])}); "
                   "showing the embedding output instead.")
        component = "output"
    return canvas.dimensions_value(result, component, only)


def show_embeddings(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                    layer: float | int | None, component: str, token: Any) -> tuple[Any, ...]:
    """Validate input, run the engine and build every output of the tab (last: the small key the page's
    ``gr.State`` keeps, ``shown.ShownInput``)."""
    text = require_text(text, empty_message=EMPTY_MESSAGE)
    pair = text_pair if text_pair and text_pair.strip() else None
    if pair is not None:
        check_length(pair, "text pair")
    check_component(component)
    with services.probing():
        result, kept = shown.compute(services, model_key, text, pair, layer)
    position = chosen_position(token, result)
    info = export_info(result.source, result.text, result.text_pair)     # the charts' export names
    return (
        summary_markdown(result),
        named(eplots.component_norms(result.tokens, result.norms), info, "Component norms per token"),
        heatmap_value(result, component),
        canvas.similarity_value(result.position_similarity),
        named(eplots.position_pca_scatter(result.position_pca, result.position_pca_variance), info, "Position PCA"),
        named(eplots.contextual_pca_scatter(result.tokens, result.segments, result.contextual_pca, result.layer,
                                            result.contextual_pca_variance), info, "Contextual PCA"),
        named(eplots.segment_difference_bars(result.segment_difference, result.segment_difference_norm,
                                             result.segment_cosine), info, "Segment difference"),
        neighbour_frame(result, position),
        gr.update(choices=token_choices(result.tokens), value=ALL_TOKENS if position is None else str(position)),
        kept,
    )


def evenly_spaced(choices: Sequence[ModelChoice], limit: int = MAX_CHECKPOINTS) -> list[ModelChoice]:
    """At most ``limit`` checkpoints, evenly spaced (see ``explorer.models.choices.evenly_spaced``)."""
    return spread(list(choices), limit)


def over_training(services: Services, model_key: str | None, positions: float | int | None,
                  progress: Any = None, run: str | None = None) -> tuple[str, go.Figure]:
    """Position-similarity small multiples over the checkpoints of ``run`` (default: the picked checkpoint's
    run, else the newest)."""
    count = (DEFAULT_OVER_TRAINING_POSITIONS if positions is None
             else whole_number(positions, "Positions", *OVER_TRAINING_POSITIONS))
    choices = services.registry().run_checkpoints(model_key, run)
    if len(choices) < 2:
        message = (f"Over training needs at least 2 checkpoints of a training run; found {len(choices)}. "
                   "Start a run in the Training tab (it saves checkpoints as it goes), or pick a checkpoint "
                   "of a run that has several.")
        return message, empty_figure("Fewer than 2 checkpoints")
    picked = evenly_spaced(choices)
    results = []
    for i, choice in enumerate(picked):
        if progress is not None:
            progress(i / len(picked), desc=f"Loading {choice.label}…")
        label = f"step {choice.step}" if choice.step is not None else choice.label
        with services.probing():   # one model at a time: the registry's cache bounds the memory
            results += embeddings_over_checkpoints([(label, services.model(choice.key))], count)
    panels = [(f"{r.label} · adjacent {r.adjacent:.2f}", r.matrix) for r in results]
    name = choices[-1].run
    rows = "\n".join(f"| {r.label} | {r.adjacent:.3f} | {r.distant:.3f} |" for r in results)
    message = (run_note(name, len(picked), len(choices), choices[0].step, choices[-1].step)
               + f"; first {results[0].matrix.shape[0]} positions. As training goes on, a bright band forms along the diagonal: neighbouring positions "
               "become similar while distant ones do not.\n\n"
               "| checkpoint | mean cosine of neighbouring positions | of positions far apart |\n"
               f"|---|---|---|\n{rows}")
    grid = named_for(eplots.position_similarity_grid(panels), f"run {name}", f"first {count} positions",
                     "Position similarity per checkpoint")
    return message, grid
