"""What the Attention tab's ablation, export and over-training buttons do, and the input checks
every Attention handler shares. No widgets here: plain arguments in, figures / text / paths out;
bad input raises ``gr.Error`` or ``ValueError`` (turned into a message by ``friendly_errors``)."""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.model.loaded_model import LoadedModel
from engine.probes.attention.ablation import AblationResult
from engine.probes.attention.maps import AttentionResult
from engine.probes.attention.head_stats import STAT_TITLES
from engine.probes.inference import ablate_heads, attention, attention_over_checkpoints
from explorer.models.choices import ModelChoice, evenly_spaced
from explorer.runs.run_picker import run_note
from explorer.attention import ablation_plots
from explorer.attention import export as attention_export
from explorer.layer_numbers import head_index, heads_text as pairs_text, parse_heads, shown_layer
from explorer.glossary import LAYER_RULE, gloss
from explorer.services import Services
from explorer.formatting import percent, plain_markdown
from explorer.forward_cache import cached
from explorer.ui_errors import check_length, require_text, whole_number
from explorer.views.plot_names import named_for

MIN_LENGTH = 8
DEFAULT_LENGTH = 128
MAX_CHECKPOINTS = 6            # checkpoints shown over training (evenly spaced, first and last included)
DEFAULT_TOP_K = 5
EMPTY_MESSAGE = "Type a sentence to see where each token looks."


EXPORT_FOLDER = "bert-explorer-exports"         # inside the temp dir of the moment (Gradio serves only from there)
EXPORT_MAX_AGE_S = 3600.0
MAX_NAMED = 20                  # wrong heads named in a refusal (then "…")


def new_export_folder(root: Path | None = None, max_age_s: float = EXPORT_MAX_AGE_S) -> str:
    """A fresh folder for one export; folders older than ``max_age_s`` go first (Gradio has served its own
    copies of their files long before), so a long-running public app does not fill its disk."""
    root = root or Path(tempfile.gettempdir()) / EXPORT_FOLDER
    root.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - max_age_s
    for old in root.glob("attention-export-*"):
        try:
            if old.is_dir() and not old.is_symlink() and old.stat().st_mtime < cutoff:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue
    return tempfile.mkdtemp(prefix="attention-export-", dir=root)


def model_shape(loaded: LoadedModel) -> tuple[int, int]:
    """(layers, heads) of a model."""
    return loaded.config.num_hidden_layers, loaded.config.num_attention_heads


def effective_length(services: Services, loaded: LoadedModel, max_length: Any) -> int:
    """The slider's max length, checked, capped at the model's positions."""
    length = DEFAULT_LENGTH if max_length is None else whole_number(max_length, "Max length", MIN_LENGTH,
                                                                    min(512, services.max_length))
    return min(length, loaded.config.max_tokens)


def cached_attention(services: Services, loaded: LoadedModel, text: str, pair: str | None,
                     length: int) -> AttentionResult:
    """``attention(loaded, text, pair, length)``, run once per input and visitor while the forward cache keeps
    it: a layer, head, head-view or statistic change reads it back (docs/design/forward-cache.md)."""
    return cached(services.forward_cache, loaded.model, ("attention", text, pair, length),
                  lambda: attention(loaded, text, pair, length))


def read_inputs(text: str | None, text_pair: str | None) -> tuple[str, str | None]:
    """The text (required) and the pair (``None`` when blank), length-checked."""
    text = require_text(text, empty_message=EMPTY_MESSAGE)
    pair = text_pair if text_pair and text_pair.strip() else None
    if pair is not None:
        check_length(pair, "text pair")
    return text, pair


def view_heads(value: Any, num_heads: int) -> list[int]:
    """Heads for the head view: all when None, else the checked ones. Heads past this model's last are
    dropped with a warning (the API's default lists the startup model's heads, and a smaller model, such
    as a live run's, must still answer); a negative head, or none left, is an error naming every wrong head."""
    if value is None:
        return list(range(num_heads))
    try:
        heads = sorted({int(v) for v in value})
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"heads for the head view must be numbers from 0 to {num_heads - 1}, "
                         f"got {str(value)[:80]!r}") from None
    kept = [h for h in heads if 0 <= h < num_heads]
    wrong = [h for h in heads if not 0 <= h < num_heads]
    beyond = [h for h in heads if h >= num_heads]
    if (wrong and wrong[0] < 0) or (beyond and not kept):
        raise ValueError(f"heads {_named(wrong)} do not exist: this model's layers have heads 0 to {num_heads - 1}")
    if beyond:
        gr.Warning(f"This model has heads 0 to {num_heads - 1}; the head view leaves out heads {_named(beyond)}.")
    return kept


def _named(heads: list[int]) -> str:
    """``[-1, 99]``: the first ``MAX_NAMED`` heads as a list, "…" after them when there are more."""
    return "[" + ", ".join(str(h) for h in heads[:MAX_NAMED]) + (", …]" if len(heads) > MAX_NAMED else "]")


def summary_markdown(result: AttentionResult, layer: int, head: int) -> str:
    """Counts and the chosen head's statistics in words; ``layer`` is the engine's index (shown from 1)."""
    s = result.stats.head(layer, head)
    first, last = (plain_markdown(name) for name in result.special_names())   # by the tokenizer: <s>, </s>
    lines = [f"**{len(result.tokens)} tokens** · **{result.num_layers} layers × {result.num_heads} heads** · "
             f"model: {result.source}",
             f"Layer {shown_layer(layer)}, head {head}: entropy {s['entropy']:.2f} {gloss('nats')} · "
             f"{first} {s['cls']:.0%} · "
             f"{last} {s['sep']:.0%} · self {s['self']:.0%} · previous {s['prev']:.0%} · next {s['next']:.0%} · "
             f"mean distance {s['distance']:.1f} tokens"]
    reach = result.reach[layer] if layer < len(result.reach) else None
    if any(r is not None for r in result.reach):      # ModernBERT: local layers see a window, global ones all
        local = [shown_layer(i) for i, r in enumerate(result.reach) if r is not None]
        lines.append((f"Layer {shown_layer(layer)} is **local**: each token sees the {reach} tokens on each side of it "
                      "and nothing farther (zeros outside a band along the diagonal)" if reach is not None else
                      f"Layer {shown_layer(layer)} is **global**: each token sees every token")
                     + f"; local layers: {', '.join(map(str, local))}.")
    if result.truncated:
        lines.append(f"⚠️ truncated: {result.num_truncated_tokens} tokens dropped to fit the max length")
    return "\n\n".join(lines)


def ablation_markdown(result: AblationResult) -> str:
    """The loss change in words, and notes."""
    lines = [f"Removed **{len(result.masked_heads)} head(s)**: {pairs_text(result.masked_heads)} (layer:head)"]
    change = result.loss_change
    if change is not None:
        lines.append(f"MLM pseudo-log-likelihood {gloss('loss')} over {len(result.scored_positions)} tokens: "
                     f"**{result.baseline.pll_loss:.3f} → {result.ablated.pll_loss:.3f} nats** "
                     f"({change:+.3f} {gloss('nats')}; positive = the model got worse)")
    if result.baseline.is_next is not None:
        lines.append(f"P(IsNext): **{percent(result.baseline.is_next)} → {percent(result.ablated.is_next)}**")
    lines += [f"ℹ️ {note}" for note in result.notes]
    return "\n\n".join(lines)


def ablation_plot(result: AblationResult) -> go.Figure:
    """Bars of baseline vs ablated for one :class:`AblationResult`."""
    fills = []
    for base, ablated in zip(result.baseline.fills, result.ablated.fills):
        words = list(dict.fromkeys(base.tokens + ablated.tokens))
        p_base, p_abl = dict(zip(base.tokens, base.probs)), dict(zip(ablated.tokens, ablated.probs))
        fills.append({"position": base.position, "tokens": words, "baseline": [p_base.get(w, 0.0) for w in words],
                      "ablated": [p_abl.get(w, 0.0) for w in words]})
    is_next = None if result.baseline.is_next is None else (result.baseline.is_next, result.ablated.is_next)
    return ablation_plots.ablation_figure(result.tokens, result.scored_positions, result.baseline.token_losses,
                                          result.ablated.token_losses, fills, is_next)


def run_ablation(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                 heads_text: str | None, top_k: Any = DEFAULT_TOP_K) -> tuple[go.Figure, str]:
    """Parse ``"layer:head, ..."`` (layers from 1, heads from 0), ablate those heads, and return the comparison
    figure and summary."""
    text, pair = read_inputs(text, text_pair)
    if not heads_text or not heads_text.strip():
        raise gr.Error("Name the heads to remove as layer:head, e.g. 1:0, 2:3 (layers from 1, heads from 0; "
                       "4:* for a whole layer).", print_exception=False)
    k = whole_number(top_k, "Top-k", 1, 20) if top_k is not None else DEFAULT_TOP_K
    with services.probing():
        loaded = services.model(model_key)
        layers, num_heads = model_shape(loaded)
        heads = parse_heads(heads_text, layers, num_heads)
        mask = [[0.0 if (l, h) in heads else 1.0 for h in range(num_heads)] for l in range(layers)]
        result = ablate_heads(loaded, text, pair, mask, top_k=k)
    figure = named_for(ablation_plot(result), loaded.source, text, f"Baseline vs ablated {heads_text}", pair)
    return figure, ablation_markdown(result)


def export_files(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                 layer: Any, head: Any, max_length: Any = DEFAULT_LENGTH) -> list[str]:
    """PNG, SVG and JSON of the chosen head's map, written to a fresh temporary folder."""
    text, pair = read_inputs(text, text_pair)
    with services.probing():
        loaded = services.model(model_key)
        index, head = head_index(*model_shape(loaded), layer, head)
        result = cached_attention(services, loaded, text, pair, effective_length(services, loaded, max_length))
    folder, number = new_export_folder(), shown_layer(index)
    title = f"Layer {number}, head {head} ({result.source})"
    paths = attention_export.write_exports(
        folder, f"attention-L{number}-H{head}", result.attentions[index, head], result.tokens, number, head,
        result.stats.head(index, head), title=title, source=result.source, text=result.text,
        text_pair=result.text_pair, token_type_ids=result.token_type_ids, layer_numbering=LAYER_RULE)
    return [str(p) for p in paths]


def pick_evenly(choices: list[ModelChoice], cap: int = MAX_CHECKPOINTS) -> list[ModelChoice]:
    """At most ``cap`` checkpoints, evenly spaced (see ``explorer.models.choices.evenly_spaced``)."""
    return evenly_spaced(choices, cap)


def over_training(services: Services, model_key: str | None, text: str | None, text_pair: str | None,
                  layer: Any, head: Any, max_length: Any = DEFAULT_LENGTH,
                  run: str | None = None) -> tuple[go.Figure, go.Figure, str]:
    """The chosen head at up to ``MAX_CHECKPOINTS`` checkpoints of ``run`` (default: the picked checkpoint's
    run, else the newest): maps and statistics over steps."""
    text, pair = read_inputs(text, text_pair)
    choices = services.registry().run_checkpoints(model_key, run)
    if not choices:
        raise gr.Error("There are no training checkpoints yet: start a run in the Training tab; its checkpoints "
                       "appear here as it saves them.", print_exception=False)
    picked = pick_evenly(choices)
    with services.probing():
        first = services.model(picked[0].key)
        length = effective_length(services, first, max_length)
        index, head = head_index(*model_shape(first), layer, head)
        models = ((f"step {c.step}" if c.step is not None else c.label, services.model(c.key)) for c in picked)
        found = attention_over_checkpoints(models, text, pair, index, head, steps=[c.step for c in picked],
                                           max_length=length)                  # loads one model at a time
    number = shown_layer(found.layer)
    maps = ablation_plots.checkpoint_maps_figure(found.maps, found.tokens, found.labels, number, found.head)
    lines = ablation_plots.stats_over_steps_figure(found.steps, found.labels, found.stats, STAT_TITLES,
                                                   number, found.head)
    name = picked[0].run
    note = (run_note(name, len(picked), len(choices), choices[0].step, choices[-1].step)
            + f"; layer {number}, head {found.head}.")
    where = f"L{number} H{found.head}"
    return (named_for(maps, f"run {name}", text, f"The head's map per checkpoint {where}", pair),
            named_for(lines, f"run {name}", text, f"The head's statistics over training {where}", pair), note)
