"""The registries' built-ins, and one check per registry: the built-ins are all there, in the order the user sees
them, and nothing is registered twice. No test lists a whole registry by hand: a head, attribution target or tab
added as docs/ARCHITECTURE.md's recipes say ("its module + one registry line") joins the registry and every check
here still holds. The tests that register a toy one run the same checks with it registered
(tests/model/test_head_specs.py, tests/explorer/test_tab_registry.py).

Heads are only ever added at the end (``register_head``), so theirs come first; a target may be listed earlier
(``AttributionSpec.order``) and a tab may go anywhere before the Glossary, so theirs are checked in order among
the others.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

BUILT_IN_HEADS = ("mlm", "nsp", "qa", "classifier", "token_classifier", "multiple_choice")
BUILT_IN_TARGETS = ("fill_mask", "qa_start", "qa_end", "next_sentence", "classify", "tag", "choose")  # the API's order
BUILT_IN_TABS = (("Tokenize", "tokenize"), ("Embeddings", "embeddings"), ("Attention", "attention"),
                 ("Fill-mask", "fill_mask"), ("Heads", "heads"), ("QA", "qa"), ("Why", "why"), ("Compare", "compare"),
                 ("Syntax", "syntax"), ("Training", "training"), ("Fine-tune", "finetune"), ("Glossary", "glossary"))


def assert_once_each(registered: Sequence[Any], what: str) -> None:
    """Nothing in ``registered`` is there twice."""
    twice = [item for i, item in enumerate(registered) if item in registered[:i]]
    assert not twice, f"{what} registered twice: {twice}"


def assert_built_ins_first(registered: Sequence[Any], built_in: Sequence[Any], what: str) -> None:
    """``registered`` starts with ``built_in``, in that order, and holds nothing twice."""
    registered = list(registered)
    assert registered[:len(built_in)] == list(built_in), f"the built-in {what} are not first, in order: {registered}"
    assert_once_each(registered, what)


def assert_built_ins_in_order(registered: Sequence[Any], built_in: Sequence[Any], what: str) -> None:
    """Every one of ``built_in`` is in ``registered``, in that order (others may stand between), each once."""
    registered = list(registered)
    assert [item for item in registered if item in built_in] == list(built_in), \
        f"the built-in {what} are not all there, in order: {registered}"
    assert_once_each(registered, what)


def check_heads() -> None:
    """``HEADS``: the built-in heads first, in canonical order (model construction, export, listings), and the
    built-ins' flags: which read the pooled vector, which are sized by labels, which share transformers'
    ``classifier.`` prefix (and so cannot share a model)."""
    from engine.model.head_specs import HEADS

    assert_built_ins_first(list(HEADS), BUILT_IN_HEADS, "heads")
    assert len({spec.module for spec in HEADS.values()}) == len(HEADS)          # one module (prefix) each
    assert [h for h in BUILT_IN_HEADS if HEADS[h].pooled] == ["nsp", "classifier", "multiple_choice"]
    assert [h for h in BUILT_IN_HEADS if HEADS[h].labelled] == ["classifier", "token_classifier"]
    assert [h for h in BUILT_IN_HEADS if HEADS[h].hf_prefix == "classifier."] == [
        "classifier", "token_classifier", "multiple_choice"]


def check_attribution_targets() -> None:
    """The predictions attribution explains: the built-in targets in the API's order, each once, and the Why tab
    offers exactly those (its dropdown) with an example row for every built-in one but ``qa_end`` (its examples
    name registered targets only)."""
    from engine.probes.attribution.methods import target_names
    from explorer.why import actions

    names = target_names()
    assert_built_ins_in_order(names, BUILT_IN_TARGETS, "attribution targets")
    assert [task for _, task in actions.task_choices()] == list(names)
    examples = {row[0] for row in actions.EXAMPLES}
    assert examples <= set(names) and set(BUILT_IN_TARGETS) - {"qa_end"} <= examples


def check_tabs() -> None:
    """``TABS``: the built-in tabs in the order shown, each title and id once, the Glossary last (the header says
    so), and every row's module with the two functions a tab has."""
    from explorer.tab_registry import TABS

    shown = [(tab.title, tab.id) for tab in TABS]
    assert_built_ins_in_order(shown, BUILT_IN_TABS, "tabs")
    assert_once_each([tab.title for tab in TABS], "tab titles")
    assert_once_each([tab.id for tab in TABS], "tab ids")
    assert shown[-1] == BUILT_IN_TABS[-1]
    assert all(callable(tab.module.build) and callable(tab.module.example_calls) for tab in TABS)
