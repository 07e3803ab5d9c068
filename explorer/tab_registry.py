"""The app's tabs, in the order shown: :data:`TABS`, one :class:`Tab` per tab, each naming its title, its id and
the module that builds it. ``build_app`` opens one ``gr.Tab`` per row, the demo warm-up (``explorer.serving.warmup``)
runs each row's examples, and the README and docs/TABS.md checks read the titles from here.

Every tab module has the same two functions (:class:`TabModule`): ``build(services, picker)`` creates the tab's
widgets inside the current ``gr.Tab`` and wires them (a tab that needs no picked model, Training, ignores the
picker), and ``example_calls(loaded)`` lists the engine calls behind its examples that ``loaded`` can run,
as ``(name, call)`` pairs, for the warm-up (``[]`` when a tab has nothing to warm up).

To add a tab: write ``explorer/<name>/tab.py`` with those two functions, add a row here, and a line for it
in the README's tab list and docs/TABS.md. ``registered(tab)`` adds one for a ``with`` block (tests).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from engine.model.loaded_model import LoadedModel
from explorer import glossary_tab
from explorer.attention import tab as attention_tab
from explorer.compare import tab as compare_tab
from explorer.embeddings import tab as embeddings_tab
from explorer.experiments import tab as experiments_tab
from explorer.fill_mask import tab as fill_mask_tab
from explorer.finetune import tab as finetune_tab
from explorer.heads import tab as heads_tab
from explorer.models.picker import ModelPicker
from explorer.qa import tab as qa_tab
from explorer.services import Services
from explorer.syntax import tab as syntax_tab
from explorer.tokenize import tab as tokenize_tab
from explorer.training import tab as training_tab
from explorer.why import tab as why_tab

ExampleCall = tuple[str, Callable[[], object]]       # (a name for the log, the engine call)


class TabModule(Protocol):
    """What a tab's module offers (``explorer/<name>/tab.py``)."""

    def build(self, services: Services, picker: ModelPicker) -> dict[str, Any]:
        """Create the tab's widgets inside the current ``gr.Tab``, wire them, return them by name."""
        ...

    def example_calls(self, loaded: LoadedModel) -> list[ExampleCall]:
        """The tab's examples as engine calls on ``loaded`` (those it has the heads for)."""
        ...


@dataclass(frozen=True)
class Tab:
    """One tab of the app: its ``title`` (shown), its ``id`` (``gr.Tab(id=...)``, stable) and its module."""

    title: str
    id: str
    module: TabModule

    def build(self, services: Services, picker: ModelPicker) -> dict[str, Any]:
        """The tab's widgets, built and wired inside the current ``gr.Tab``."""
        return self.module.build(services, picker)

    def example_calls(self, loaded: LoadedModel) -> list[ExampleCall]:
        """The tab's warm-up calls on ``loaded``."""
        return self.module.example_calls(loaded)


TABS: list[Tab] = [
    Tab("Tokenize", "tokenize", tokenize_tab),
    Tab("Embeddings", "embeddings", embeddings_tab),
    Tab("Attention", "attention", attention_tab),
    Tab("Fill-mask", "fill_mask", fill_mask_tab),
    Tab("Heads", "heads", heads_tab),           # each task head: next sentence, classify, tag, choose
    Tab("QA", "qa", qa_tab),
    Tab("Why", "why", why_tab),                 # which tokens pushed a prediction (attributions)
    Tab("Compare", "compare", compare_tab),     # two models side by side on one input
    Tab("Syntax", "syntax", syntax_tab),        # heads that follow dependencies, layers that know parts of speech
    Tab("Training", "training", training_tab),
    Tab("Fine-tune", "finetune", finetune_tab),
    Tab("Experiments", "experiments", experiments_tab),   # a paper's ablation re-run small, ours beside its table
    Tab("Glossary", "glossary", glossary_tab),   # every word the app uses, one sentence each; last
]


@contextlib.contextmanager
def registered(tab: Tab) -> Iterator[Tab]:
    """``tab`` in :data:`TABS` for the duration of a ``with`` block (tests, experiments), just before the
    Glossary tab, which stays last (the page's header says so); removed afterwards. ``ValueError`` if its title
    or its id is taken."""
    taken = [t.id for t in TABS if t.title == tab.title or t.id == tab.id]
    if taken:
        raise ValueError(f"a tab titled {tab.title!r} or with id {tab.id!r} is registered already ({taken[0]})")
    TABS.insert(next((i for i, t in enumerate(TABS) if t.module is glossary_tab), len(TABS)), tab)
    try:
        yield tab
    finally:
        TABS[:] = [t for t in TABS if t is not tab]
