"""Which widget of each tab maps to which query key: :data:`LINKS`, one :class:`TabLink` per tab of
``explorer.tab_registry.TABS`` (by its id).

A tab's link has one :class:`Section` (the Heads tab: one per inner tab, chosen by ``section=``). A section names
its fields (``fields.Field``: a query key and the path of its widget in the tab's ``build`` dict), its main
button (``action``: pressed once when a link opens), the fields that must be non-empty for that press (``needs``)
and ``shown``: an output whose content means the person who copied the link was looking at a result (a link
copied before that opens without pressing the button: ``run=0``). Training, Fine-tune and the Glossary carry
the tab only. Ranges, choices and defaults are the widgets' own (``query.bind``), so they are not repeated here.

The query keys: ``tab``, ``section``, ``model`` (the picker; Compare: ``a`` and ``b``), ``text``, ``pair``,
``question``, ``context``, ``layer``, ``head``, ``len``, ``heads`` (the head view's), ``stat``, ``token`` (the
neuron view's query token; the Embeddings neighbours' token), ``component``, ``targets``, ``k``, ``zoom``,
``threshold``, ``choices``, ``answer_len``, ``seq``, ``stride``, ``impossible``, ``task``, ``target``, ``which``,
``method``, ``score``, ``steps``, ``sentences``, ``treebank``, ``relation``, ``direction``; and ``run`` (0: do not
press the button) and ``embed`` (1: the view alone; ``embed.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.serving.links.fields import SHORT_CHARS, TEXT_CHARS, Field, Kind

PICKER = "@picker"           # a path's first part naming the model picker's dropdown, not a tab's widget


@dataclass(frozen=True)
class Section:
    """One restorable part of a tab (the whole tab, or one inner tab of Heads: ``id`` its ``section=`` value,
    ``inner_id`` its ``gr.Tab`` id)."""

    fields: tuple[Field, ...] = ()
    action: tuple[str, ...] | None = None
    needs: tuple[str, ...] = ()
    shown: tuple[str, ...] | None = None
    id: str = ""
    inner_id: str | None = None


@dataclass(frozen=True)
class TabLink:
    """A tab's link: its ``tab`` id, its sections (the first is the default) and, for a tab with inner tabs, the
    path of its inner ``gr.Tabs`` (``inner``)."""

    tab: str
    sections: tuple[Section, ...] = (Section(),)
    inner: tuple[str, ...] | None = None

    def section(self, section_id: str | None) -> Section:
        """The section ``section_id`` names (the first when it names none)."""
        return next((s for s in self.sections if section_id and s.id == section_id), self.sections[0])

    @property
    def fields(self) -> tuple[Field, ...]:
        """Every field of every section, each widget once (the Copy link button's inputs)."""
        seen: dict[tuple[str, ...], Field] = {}
        for section in self.sections:
            for f in section.fields:
                seen.setdefault(f.path, f)
        return tuple(seen.values())


def _text(key: str, *path: str, label: str | None = None, chars: int = TEXT_CHARS) -> Field:
    return Field(key, path or (key,), Kind.TEXT, label or key, chars=chars)


def _number(key: str, *path: str, label: str, top: str | None = None, low: float | None = None) -> Field:
    return Field(key, path or (key,), Kind.NUMBER, label, top=top, low=low)


def _choice(key: str, *path: str, label: str | None = None) -> Field:
    return Field(key, path or (key,), Kind.CHOICE, label or key)


def _flag(key: str, *path: str, label: str) -> Field:
    return Field(key, path or (key,), Kind.FLAG, label)


MODEL = Field("model", (PICKER,), Kind.MODEL, "model")
TEXT, PAIR = _text("text"), _text("pair", label="text pair")
BUTTON, SUMMARY = ("button",), ("summary",)


def _heads_section(section_id: str, head: str, *fields: Field) -> Section:
    """One inner tab of Heads: its fields under ``built["heads"][head]``."""
    moved = tuple(Field(f.key, (head, *f.path), f.kind, f.label, f.chars, f.low, f.top) for f in fields)
    return Section((MODEL, *moved), action=(head, "button"), needs=("text",), shown=(head, "summary"),
                   id=section_id, inner_id=f"heads_{section_id}")


LINKS: dict[str, TabLink] = {link.tab: link for link in (
    TabLink("tokenize", (Section((MODEL, TEXT, PAIR, _number("len", "length", label="max length")),
                                 BUTTON, ("text",), SUMMARY),)),
    TabLink("embeddings", (Section((
        MODEL, TEXT, PAIR, _number("layer", label="layer", top="layer"),
        _choice("component"), Field("token", ("token",), Kind.TOKEN, "token", top="position")),
        BUTTON, ("text",), SUMMARY),)),
    TabLink("attention", (Section((
        MODEL, TEXT, PAIR, _number("layer", label="layer", top="layer"), _number("head", label="head", top="head"),
        _number("len", "length", label="max length"),
        Field("heads", ("view_heads",), Kind.NUMBERS, "heads in the head view", top="head"),
        _choice("stat", "statistic", label="head statistic"),
        _number("token", "neuron", "query", label="query token", low=0, top="position")),
        BUTTON, ("text",), SUMMARY),)),
    TabLink("fill_mask", (Section((MODEL, TEXT, _text("targets"), _number("k", "top_k", label="top-k"),
                                   _flag("zoom", label="zoom")), BUTTON, ("text",), SUMMARY),)),
    TabLink("heads", (
        _heads_section("next_sentence", "nsp", _text("text", "sentence_a", label="sentence A"),
                       _text("pair", "sentence_b", label="sentence B")),
        _heads_section("classify", "classifier", _text("text"), _text("pair", "text_pair", label="text pair")),
        _heads_section("tag_words", "token_classifier", _text("text")),
        _heads_section("choose", "multiple_choice", _text("text", "context", label="context"), _text("choices")),
        _heads_section("replaced_tokens", "replaced_tokens", _text("text"),
                       _number("threshold", label="threshold"))), inner=("tabs",)),
    TabLink("qa", (Section((
        MODEL, _text("question"), _text("context"), _number("k", "top_k", label="top-k"),
        _number("answer_len", "max_answer_len", label="max answer length"),
        _number("seq", "max_seq_len", label="max sequence length"),
        _number("stride", "doc_stride", label="doc stride"), _flag("impossible", label="allow no answer")),
        BUTTON, ("question", "context"), SUMMARY),)),
    TabLink("why", (Section((
        MODEL, _choice("task", label="prediction"), TEXT, PAIR, _text("target", chars=SHORT_CHARS),
        _number("which", label="which"), _choice("method"), _choice("score"), _number("steps", label="steps")),
        BUTTON, ("text",), SUMMARY),)),
    TabLink("compare", (Section((
        Field("a", ("model_a",), Kind.MODEL, "model A"), Field("b", ("model_b",), Kind.MODEL, "model B"), TEXT,
        _number("layer", label="layer"), _number("head", label="head"), _number("k", "top_k", label="top k")),
        BUTTON, ("text",), SUMMARY),)),
    TabLink("syntax", (Section((
        MODEL, _number("sentences", label="sentences"), _text("treebank", chars=SHORT_CHARS),
        _text("relation", chars=SHORT_CHARS), _choice("direction")),
        ("heads_button",), (), ("heads_summary",)),)),
    TabLink("training"),
    TabLink("finetune"),
    TabLink("glossary"),
)}
