"""The Training form's *Objective* section: pretraining's own settings (``PretrainingSettings``), built from the
dataclass's fields, read back into ``JobSpec.task_settings`` as ``python -m engine.pretrain``'s flags are.

Each field gets a widget: the few that read better otherwise have their own (``OWN_WIDGETS``: the objective and the
pair task and the packing as labelled choices, the masking mix as three shares); any other field gets one by its type (a checkbox for
a ``bool``, a number box for an ``int`` / ``float``, a text box otherwise), labelled from its name, its
``metadata["help"]`` under it. So a new setting appears in the form, in ``/train_start``'s parameters and in the
job with no edit here. Fields in ``FOR_OBJECTIVE`` are shown only for that objective and sent only then (a hidden
box keeps the default). The rules stay ``PretrainingSettings``'s and ``JobSpec.validate``'s own (no second copy
here); their messages name the form's labels (``LABELS``, ``reworded``). No tensor math.
"""
from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr

from engine.data.packing import PACKINGS
from engine.data.pretraining_objective import OBJECTIVES, PAIR_TASKS
from engine.training.jobs.task_flags import value_type
from engine.training.tasks.pretraining_settings import PretrainingSettings, parse_mix

OBJECTIVE_LABELS = {"mlm": "Masked LM (BERT)", "clm": "Left-to-right LM (each token predicts the next)",
                    "rtd": "Replaced-token detection (ELECTRA)"}
PAIR_LABELS = {"nsp": "Next sentence (BERT)", "sop": "Sentence order (ALBERT)"}
PACKING_LABELS = {"segment-pair": "Segment pairs (BERT)", "sentence-pair": "Sentence pairs (RoBERTa)",
                  "full-sentences": "Full sentences, across documents (RoBERTa)",
                  "doc-sentences": "Full sentences, within a document (RoBERTa)"}
MIX_PARTS = ("[MASK] share", "random-token share", "kept share")
LABELS = {"objective": "Objective", "pair_task": "Pair task", "mask_mix": "Masking mix",
          "static_masking": "Static masking", "generator_size": "Generator size", "rtd_weight": "RTD weight"}
FOR_OBJECTIVE = {"generator_size": "rtd", "rtd_weight": "rtd"}     # shown (and sent) only for that objective
NSP_BOX = "“Next-sentence prediction (NSP)”"
_CLI_WORDS = {"(--no-nsp)": f"(untick {NSP_BOX})", "(drop --no-nsp)": f"(tick {NSP_BOX})"}


@dataclass(frozen=True)
class SettingWidgets:
    """One setting's widgets (the masking mix has three: its shares, read back as a list)."""

    name: str
    widgets: tuple[Any, ...]


def label(name: str) -> str:
    """The form's label of a setting."""
    return LABELS.get(name, name.replace("_", " ").capitalize())


def _mix_widgets(default: str) -> SettingWidgets:
    shares = parse_mix(default)
    with gr.Row():
        boxes = tuple(gr.Number(share, label=part, minimum=0, maximum=1, step=0.05, min_width=120)
                      for share, part in zip(shares, MIX_PARTS))
    return SettingWidgets("mask_mix", boxes)


OWN_WIDGETS: dict[str, Callable[[Any], SettingWidgets]] = {
    "objective": lambda default: SettingWidgets("objective", (gr.Dropdown(
        [(OBJECTIVE_LABELS.get(o, o), o) for o in OBJECTIVES], value=default, label=label("objective"),
        info="left-to-right LM and replaced-token detection need NSP off"),)),
    "pair_task": lambda default: SettingWidgets("pair_task", (gr.Dropdown(
        [(PAIR_LABELS.get(p, p), p) for p in PAIR_TASKS], value=default, label=label("pair_task"),
        info="what the sentence pairs teach (with NSP on)"),)),
    "mask_mix": _mix_widgets,
    "packing": lambda default: SettingWidgets("packing", (gr.Dropdown(
        [(PACKING_LABELS.get(p, p), p) for p in PACKINGS], value=default, label=label("packing"),
        info="how the text is cut into inputs; full and doc sentences need NSP off"),)),
}


def _by_type(field: dataclasses.Field, visible: bool = True) -> SettingWidgets:
    """A widget for a setting with no widget of its own, by its type."""
    kind, name, default = value_type(PretrainingSettings, field.name), field.name, field.default
    shown = dict(label=label(name), info=field.metadata.get("help", ""), visible=visible)
    if kind is bool:
        return SettingWidgets(name, (gr.Checkbox(bool(default), **shown),))
    if kind in (int, float):
        return SettingWidgets(name, (gr.Number(default, **shown),))
    return SettingWidgets(name, (gr.Textbox("" if default is None else str(default), max_lines=1, **shown),))


def build_objective() -> list[SettingWidgets]:
    """The *Objective* accordion's widgets (inside the current Blocks), one group per setting in the dataclass's
    order; those of ``FOR_OBJECTIVE`` hidden until their objective is chosen."""
    groups = []
    with gr.Accordion("Objective (what pretraining teaches: the BERT paper's ablations)", open=False):
        gr.Markdown("Masked LM is BERT's objective; the others are the answers its ablations and successors compare "
                    "(docs/design/experiments.md). The Experiments tab runs them side by side.")
        first = PretrainingSettings().objective
        for field in dataclasses.fields(PretrainingSettings):
            own = OWN_WIDGETS.get(field.name)
            visible = FOR_OBJECTIVE.get(field.name, first) == first
            groups.append(own(field.default) if own is not None else _by_type(field, visible))
    _wire_visibility(groups)
    return groups


def _wire_visibility(groups: Sequence[SettingWidgets]) -> None:
    """The objective's choice shows the settings that are for it."""
    by_name = {g.name: g for g in groups}
    objective = by_name["objective"].widgets[0]
    shown = [w for g in groups if g.name in FOR_OBJECTIVE for w in g.widgets]
    if not shown:
        return
    owners = [FOR_OBJECTIVE[g.name] for g in groups if g.name in FOR_OBJECTIVE for _ in g.widgets]
    objective.change(lambda chosen: [gr.update(visible=chosen == owner) for owner in owners], inputs=objective,
                     outputs=shown, queue=False, api_visibility="private", show_progress="hidden")


def inputs(groups: Sequence[SettingWidgets]) -> list[Any]:
    """Every widget of the section, in order (the Start button's inputs after the form's own)."""
    return [w for g in groups for w in g.widgets]


def widget_count(groups: Sequence[SettingWidgets]) -> list[tuple[str, int]]:
    """(setting, how many widgets) in order: how ``task_settings`` reads a flat list of values back."""
    return [(g.name, len(g.widgets)) for g in groups]


def task_settings(layout: Sequence[tuple[str, int]], values: Sequence[Any]) -> dict[str, Any]:
    """``JobSpec.task_settings`` from the section's values (in ``inputs`` order), checked by ``PretrainingSettings``
    itself: a ``ValueError`` naming the form's labels says what is wrong. A setting of another objective (hidden)
    keeps its default, and so does one left out (None: an API call that does not give it)."""
    given: dict[str, Any] = {}
    position = 0
    for name, count in layout:
        part = list(values[position:position + count])
        position += count
        given[name] = part if name == "mask_mix" else part[0]
    return checked(given)


def checked(given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` settings (by name) checked by ``PretrainingSettings``, as the values ``run.json`` keeps."""
    defaults = {f.name: f.default for f in dataclasses.fields(PretrainingSettings)}
    values = {name: value for name, value in given.items() if name in defaults and value is not None}
    if isinstance(values.get("mask_mix"), list) and all(v is None for v in values["mask_mix"]):
        del values["mask_mix"]                          # an API call that leaves the shares out: the default mix
    objective = values.get("objective") or defaults["objective"]
    for name, owner in FOR_OBJECTIVE.items():
        if objective != owner:
            values[name] = defaults[name]
    if "mask_mix" in values and isinstance(values["mask_mix"], list):
        if any(v is None or v == "" for v in values["mask_mix"]):
            raise ValueError(f"{label('mask_mix')}: give all three shares ({', '.join(MIX_PARTS)}), adding up to 1")
        values["mask_mix"] = [_number(v, label("mask_mix")) for v in values["mask_mix"]]
    for name in ("generator_size", "rtd_weight"):
        if name in values:
            values[name] = _number(values[name], label(name))
    try:
        settings = PretrainingSettings(**values)
    except (TypeError, ValueError) as exc:
        raise ValueError(reworded(str(exc))) from None
    return dataclasses.asdict(settings)


def reworded(message: str) -> str:
    """An engine message about these settings with the form's words: its labels for the settings' names and the
    NSP box for the command line's ``--no-nsp``."""
    for cli, form in _CLI_WORDS.items():
        message = message.replace(cli, form)
    return re.sub(r"\b(" + "|".join(map(re.escape, LABELS)) + r")\b", lambda m: label(m.group(1)), message)


def _number(value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None


def describe(record: Mapping[str, Any] | None) -> str:
    """A run's own objective settings (from its ``run.json``'s ``task_settings``), read-only, as one line."""
    settings = dict((record or {}).get("task_settings") or {})
    if not settings:
        return "Its objective: masked LM (BERT's; the run was written before the setting existed)."
    objective = str(settings.get("objective", "mlm"))
    parts = [OBJECTIVE_LABELS.get(objective, objective)]
    if "mask_mix" in settings and objective != "clm":
        parts.append(f"masking mix {str(settings['mask_mix']).replace(',', ' / ')}")
        parts.append("static masking" if settings.get("static_masking") else "dynamic masking")
    if "pair_task" in settings:
        parts.append(f"pair task: {PAIR_LABELS.get(str(settings['pair_task']), settings['pair_task'])} (with NSP on)")
    if objective == "rtd":
        parts.append(f"generator size {settings.get('generator_size')} · RTD weight {settings.get('rtd_weight')}")
    others = [f"{label(k)} {v}" for k, v in settings.items() if k not in LABELS]
    return "Its objective (fixed once a run exists, a Continue keeps it): " + " · ".join(parts + others) + "."


MIX_PARAMETERS = ("mask_share", "random_share", "keep_share")    # the masking mix's three boxes in the API


def api_parameters(groups: Sequence[SettingWidgets]) -> list[tuple[str, Any, str]]:
    """(parameter name, default, help) of every widget of the section, in ``inputs`` order: the endpoint's."""
    found: list[tuple[str, Any, str]] = []
    helps = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(PretrainingSettings)}
    for group in groups:
        if group.name == "mask_mix":
            found += [(name, widget.value, f"masking mix: the {part} of the chosen positions (the three add up to 1)")
                      for name, widget, part in zip(MIX_PARAMETERS, group.widgets, MIX_PARTS)]
            continue
        owner = FOR_OBJECTIVE.get(group.name)
        note = f" (objective {owner} only)" if owner else ""
        found.append((group.name, group.widgets[0].value, helps.get(group.name, "") + note))
    return found


def endpoint_handler(handler: Callable[..., str], groups: Sequence[SettingWidgets]) -> Callable[..., str]:
    """``handler`` (the form's own parameters, then ``token``, then ``objective_values``: this section's values in
    ``inputs`` order) as the endpoint whose parameters are the form's, one per widget of this section, then ``token``;
    its docstring names each, so a new setting is in the API with no edit of the tab."""
    base = inspect.signature(handler)
    own = [p for p in base.parameters.values() if p.name not in ("token", "objective_values")]
    extra = api_parameters(groups)
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    added = [inspect.Parameter(name, kind, default=default, annotation=type(default)) for name, default, _ in extra]
    signature = inspect.Signature([*own, *added, base.parameters["token"]], return_annotation=str)

    def train_start(*args: Any, **kwargs: Any) -> str:
        given = signature.bind(*args, **kwargs)
        given.apply_defaults()
        values = given.arguments
        return handler(*(values[p.name] for p in own), token=values["token"],
                       objective_values=[values[name] for name, _, _ in extra])

    train_start.__signature__ = signature                  # type: ignore[attr-defined]  # the API's parameters
    train_start.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()} | {"return": str}
    lines = "".join(f"            {name}: {text}\n" for name, _, text in extra)
    doc = handler.__doc__ or ""
    at = doc.find("            token:")
    train_start.__doc__ = doc[:at] + lines + doc[at:] if at >= 0 else doc
    return train_start
