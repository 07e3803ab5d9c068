"""The Syntax tab's work, without widgets: the sentences (bundled sample or an upload), one cached forward per
model and data, and each view's outputs (summary, figures, table, plain JSON).

The forward (``engine.probes.syntax.features``) is kept in the app's forward cache per visitor, model object
and data, so the heads view, a relation or direction change and the layer probe share it; the probe's result is
kept there too. Over training, each checkpoint's point is kept by ``engine.probes.syntax.over_training``.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from engine.model.loaded_model import LoadedModel
from engine.probes.syntax.conllu import DependencySentence, fingerprint, read_conllu, read_sample
from engine.probes.syntax.features import SentenceFeatures, sentence_features
from engine.probes.syntax.heads import DIRECTIONS, MIN_COUNT, HeadScores, check_direction, head_scores
from engine.probes.syntax.layer_probe import LayerProbeResult, layer_probe
from engine.probes.syntax.over_training import CheckpointRef, syntax_over_checkpoints
from engine.probes.syntax.parser import attention_parser
from explorer.forward_cache import cached
from explorer.glossary import gloss
from explorer.models.choices import evenly_spaced
from explorer.runs.run_picker import run_note
from explorer.services import Services
from explorer.syntax import plots
from explorer.syntax.treebanks import treebank_path
from explorer.ui_errors import whole_number
from explorer.views.export_names import export_info
from explorer.views.plot_names import named

SAMPLE_NAME = "the bundled sample (UD English EWT, 300 sentences)"
MAX_SENTENCES = 1_000              # sentences one request reads (the first ones of the file)
MAX_UPLOAD_MB = 16
MAX_CHECKPOINTS = 6
TABLE_COLUMNS = ["relation", "arcs", "best head", "direction", "accuracy", "baseline (offset)", "beats it by",
                 "example sentence"]


def upload_path(value: Any) -> Path | None:
    """The uploaded file's path, from what Gradio hands over (a path string, or a FileData-like dict)."""
    if isinstance(value, dict):
        value = value.get("path")
    return None if value is None or value == "" else Path(str(value))


def sentences_for(data_file: Any, count: Any, treebank: str | None = None) -> tuple[list[DependencySentence], str]:
    """The first ``count`` sentences of the upload, else of the server treebank ``treebank`` (``server:<name>``),
    else of the bundled sample, and the data's name as shown; ``gr.Error`` with one sentence when the file cannot
    be used."""
    count = whole_number(count, "Sentences", 2, MAX_SENTENCES)
    path = upload_path(data_file)
    on_server = path is None
    if on_server:
        try:
            path = treebank_path(treebank)
        except ValueError as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        if path is None:
            return read_sample()[:count], SAMPLE_NAME
        name = str(treebank).strip()                 # the key, never the server path
    else:
        name = path.name
    if path.suffix.lower() not in (".conllu", ".conll", ".txt"):
        raise gr.Error(f"{name} is not a CoNLL-U file: use a .conllu file (ten tab-separated columns per word).",
                       print_exception=False)
    try:
        sentences = read_conllu(path, MAX_UPLOAD_MB * 2**20)
    except FileNotFoundError:
        gone = "is gone from the server" if on_server else "did not arrive (the upload is gone); upload it again"
        raise gr.Error(f"{name} {gone}.", print_exception=False) from None
    except ValueError as exc:
        raise gr.Error(str(exc).replace(str(path), name), print_exception=False) from None
    return sentences[:count], name


def features_for(services: Services, loaded: LoadedModel, sentences: Sequence[DependencySentence]) -> SentenceFeatures:
    """The model's word-level attention and vectors on ``sentences``: one forward, kept per visitor."""
    return cached(services.forward_cache, loaded.model, ("syntax", fingerprint(sentences)),
                  lambda: sentence_features(loaded, sentences))


def data_line(name: str, features: SentenceFeatures) -> str:
    """"On the bundled sample: 200 sentences, 3,712 words (2 skipped: ...)"."""
    words = sum(len(s) for s in features.sentences)
    line = f"On **{name}**: {len(features.sentences):,} sentences, {words:,} words; model `{features.source}`."
    if features.skipped:
        shown = "; ".join(f"sentence {i + 1}: {why}" for i, why in features.skipped[:3])
        line += f" {len(features.skipped)} sentence(s) skipped ({shown}{' …' if len(features.skipped) > 3 else ''})."
    return line


def best_head_table(scores: HeadScores) -> pd.DataFrame:
    """One row per relation: its best head (over both directions) beside the fixed-offset baseline."""
    rows = [[row["relation"], row["count"], f"{row['layer']}-{row['head']}", row["direction"],
             f"{row['accuracy']:.1%}", f"{row['baseline']:.1%} ({row['offset']:+d})",
             f"{row['margin'] * 100:+.1f} pt", row["example"]] for row in scores.best_heads()]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def heads_summary(scores: HeadScores, relation: str, direction: str, data: str) -> str:
    """The data, how many relations a head beats the baseline for, and the chosen relation's best head."""
    beaten = scores.beaten()
    r = scores.relations.index(relation)
    grid = scores.accuracy[direction][r]
    layer, head = divmod(int(grid.argmax()), grid.shape[1])
    lines = [data,
             f"A head beats the best fixed-offset baseline for **{len(beaten)} of {len(scores.relations)}** relations"
             + (f" ({', '.join(beaten[:12])}{' …' if len(beaten) > 12 else ''})." if beaten else "."),
             f"**{relation}** ({direction}, {int(scores.counts[r])} arcs): best head **{layer + 1}-{head}** "
             f"({float(grid.max()):.1%}) against the baseline's {float(scores.baseline[direction][r]):.1%} "
             f"(always the word {int(scores.offset[direction][r]):+d} away)."]
    return "  \n".join(lines)


def chosen_relation(relation: str | None, known: Sequence[str], data: str) -> str:
    """``relation`` when the data scored it; none given: ``det`` (else the most frequent relation); anything else
    is a ``gr.Error`` listing the relations the data has enough arcs of."""
    if relation is None or (isinstance(relation, str) and not relation.strip()):
        return "det" if "det" in known else known[0]
    if relation in known:
        return relation
    plain = isinstance(relation, str) and re.fullmatch(r"[A-Za-z_:]{1,40}", relation)
    shown = repr(relation) if plain else "That relation"                 # no markup or megabytes echoed
    raise gr.Error(f"{shown} is not a relation scored on {data}: pick one of {', '.join(known)} (the relations "
                   f"with at least {MIN_COUNT} arcs there).", print_exception=False)


def heads_view(services: Services, model_key: str | None, sentences: Any, data_file: Any, relation: str | None,
               direction: str | None, treebank: str | None = None) -> tuple[Any, ...]:
    """Summary, every head × relation heatmap, the chosen relation's layers × heads grid, the best-head table
    and the plain JSON."""
    direction = direction or DIRECTIONS[0]
    try:
        check_direction(direction)
    except ValueError as exc:
        raise gr.Error(str(exc), print_exception=False) from None
    chosen, name = sentences_for(data_file, sentences, treebank)
    with services.probing():
        features = features_for(services, services.model(model_key), chosen)
        scores = head_scores(features)
    relation = chosen_relation(relation, scores.relations, name)
    r = scores.relations.index(relation)
    info = export_info(features.source, name)                        # the charts' export names
    return (heads_summary(scores, relation, direction, data_line(name, features)),
            named(plots.relations_overview(scores.accuracy[direction], scores.relations, scores.counts.tolist(),
                                           scores.baseline[direction].tolist(), direction),
                  info, f"Every head against every relation {direction}"),
            named(plots.relation_heatmap(scores.accuracy[direction][r], relation, float(scores.baseline[direction][r]),
                                         int(scores.offset[direction][r]), direction),
                  info, f"Each head's accuracy {relation} {direction}"),
            best_head_table(scores), scores.to_pipeline())


def probe_summary(result: LayerProbeResult, data: str) -> str:
    """The data, the split, where selectivity peaks and the majority baseline."""
    best = result.best_layer
    return "  \n".join([
        data,
        f"Trained on {result.train_words:,} words of {result.train_sentences} sentences, scored on "
        f"{result.test_words:,} held-out words of {result.test_sentences} (seed {result.seed}); each word is "
        f"{result.representation}.",
        f"Selectivity peaks at **layer {best}** (accuracy {result.accuracy[best]:.1%}, control "
        f"{result.control_accuracy[best]:.1%}); tagging each word with its most frequent training tag gets "
        f"{result.majority:.1%}."])


def probe_view(services: Services, model_key: str | None, sentences: Any, data_file: Any,
               treebank: str | None = None) -> tuple[Any, ...]:
    """Summary, the accuracy / control / selectivity chart by layer and the plain JSON."""
    chosen, name = sentences_for(data_file, sentences, treebank)
    with services.probing():
        loaded = services.model(model_key)
        features = features_for(services, loaded, chosen)
        result, parsed = cached(services.forward_cache, loaded.model, ("syntax-probe", fingerprint(chosen)),
                                lambda: (layer_probe(features), attention_parser(features)))
    parser_line = (f"The attention-only parser (every head's attention, both ways, one linear score) finds "
                   f"{parsed.uas:.1%} of held-out words' heads ({gloss('UAS')}); always the word "
                   f"{parsed.baseline_offset:+d} away finds {parsed.baseline_uas:.1%}.")
    return (probe_summary(result, data_line(name, features)) + "  \n" + parser_line,
            named(plots.probe_figure(result.layers, result.accuracy, result.control_accuracy, result.majority),
                  export_info(features.source, name), "UPOS probe by layer"),
            {**result.to_pipeline(), "attention_parser": parsed.to_pipeline()})


def over_training_view(services: Services, model_key: str | None, run: str | None, sentences: Any,
                       data_file: Any, relations: str | None, treebank: str | None = None) -> tuple[Any, ...]:
    """Up to ``MAX_CHECKPOINTS`` checkpoints of the run: a note, the lines over steps and the plain JSON."""
    chosen, name = sentences_for(data_file, sentences, treebank)
    registry = services.registry()
    choices = registry.run_checkpoints(model_key, run or None)
    if not choices:
        raise gr.Error("There are no training checkpoints yet: start a run in the Training tab; its checkpoints "
                       "appear here as it saves them.", print_exception=False)
    picked = evenly_spaced(choices, MAX_CHECKPOINTS)
    refs = [CheckpointRef(f"step {c.step}" if c.step is not None else c.label, c.step, registry.folder(c.key),
                          lambda key=c.key: services.model(key)) for c in picked]
    with services.probing():
        found = syntax_over_checkpoints(refs, chosen)
    wanted = [r.strip() for r in (relations or "").split(",") if r.strip()] or found.relations[:5]
    shown = [r for r in wanted if r in found.relations][:10] or found.relations[:5]
    index = [found.relations.index(r) for r in shown]
    figure = plots.over_training_figure(found.steps, found.labels, shown, found.best_accuracy[:, index],
                                        found.baseline[index].tolist(), found.selectivity)
    note = (run_note(picked[0].run, len(picked), len(choices), choices[0].step, choices[-1].step)
            + f"; on {name} ({len(chosen)} sentences); {sum(found.cached)} of {len(picked)} point(s) from the cache."
            + (f" Not in these sentences' relations: {', '.join(sorted(set(wanted) - set(shown)))[:200]}."
               if set(wanted) - set(shown) else ""))
    figure = named(figure, export_info(f"run {picked[0].run}", name), "Syntax over training")
    return note, figure, found.to_pipeline()


def relation_choices() -> list[str]:
    """The bundled sample's relations with enough arcs, most arcs first (the dropdown's list at start)."""
    from engine.probes.syntax.heads import relation_counts

    return [r for r, _ in relation_counts(read_sample())]
