"""The Training tab's masking view builders (``explorer.training.plots``): batch dicts in, plotly figures out."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from engine.data.masking import KIND_NAMES  # noqa: E402
from explorer.training import plots as tp  # noqa: E402


def _is_empty(fig: go.Figure) -> bool:
    return len(fig.data) == 0 and len(fig.layout.annotations) == 1


def test_kind_colors_cover_engine_kinds() -> None:
    assert set(tp.KIND_COLORS) == set(KIND_NAMES)
    assert len(set(tp.KIND_COLORS.values())) == len(KIND_NAMES)


def test_masked_strip_colors_per_kind() -> None:
    tokens = ["[CLS]", "the", "[MASK]", "cat", "zebra", "[SEP]"]
    kinds = ["none", "none", "[MASK]", "kept", "random", "none"]
    labels = [None, None, "dog", "cat", "sat", None]
    fig = tp.masked_strip(tokens, kinds, labels)
    traces = {t.name: t for t in fig.data}
    assert set(traces) == {tp.KIND_LABELS[k] for k in set(kinds)}
    for kind in set(kinds):
        t = traces[tp.KIND_LABELS[kind]]
        assert t.marker.color == tp.KIND_COLORS[kind]
        assert list(t.x) == [i for i, k in enumerate(kinds) if k == kind]
    assert list(traces[tp.KIND_LABELS["[MASK]"]].text) == ["dog"]
    assert [c[1] for c in traces[tp.KIND_LABELS["random"]].customdata] == ["sat"]
    assert list(fig.layout.xaxis.ticktext) == tokens  # by position: repeated tokens stay separate


def test_masked_strip_rejects_mismatched_lengths_and_handles_empty() -> None:
    with pytest.raises(ValueError):
        tp.masked_strip(["a"], ["none", "kept"])
    assert _is_empty(tp.masked_strip([], []))


def test_batch_figure_and_rows() -> None:
    assert _is_empty(tp.batch_figure(None)) and tp.masked_rows(None) == []
    batch = {"step": 7, "next_sentence_label": [1], "rows": [{
        "tokens": ["[CLS]", "[MASK]", "b", "[SEP]"], "mask_kind_names": ["none", "[MASK]", "kept", "none"],
        "label_tokens": [None, "a", "b", None]}]}
    fig = tp.batch_figure(batch)
    assert "Step 7" in fig.layout.title.text and "random sentence" in fig.layout.title.text
    assert tp.masked_rows(batch) == [[1, "[MASK]", "a", "[MASK]"], [2, "b", "b", "kept"]]


def test_the_legend_says_the_runs_own_mix_and_mask_token_and_plotly_shows_tokens_as_text() -> None:
    """A run that masks 100% with RoBERTa's ``<mask>``: the legend gives that, not BERT's 80% [MASK]; a token
    such as ``<s>`` reaches Plotly as entities (Plotly reads ``<s>`` as strike-through and hides it)."""
    batch = {"step": 3, "mask_mix": [1.0, 0.0, 0.0], "mask_token": "<mask>", "next_sentence_label": [-100], "rows": [{
        "tokens": ["<s>", "<mask>", "b", "</s>"], "mask_kind_names": ["none", "[MASK]", "none", "none"],
        "label_tokens": [None, "a&b", None, None]}]}
    fig = tp.batch_figure(batch)
    names = {t.name for t in fig.data}
    assert "→ &lt;mask&gt; (100%)" in names and not any("80%" in n for n in names)
    assert list(fig.layout.xaxis.ticktext) == ["&lt;s&gt;", "&lt;mask&gt;", "b", "&lt;/s&gt;"]
    masked = next(t for t in fig.data if t.name.startswith("→"))
    assert list(masked.text) == ["a&amp;b"] and masked.customdata[0][0] == "&lt;mask&gt;"
    assert tp.kind_labels(None, "[MASK]") == tp.KIND_LABELS and tp.KIND_LABELS["[MASK]"] == "→ [MASK] (80%)"   # BERT's default
    assert tp.kind_labels([0.8, 0.0, 0.2], None)["kept"] == "kept, still predicted (20%)"
