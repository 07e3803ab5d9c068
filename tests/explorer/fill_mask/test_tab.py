"""Fill-mask tab: handlers equal engine.probes.inference, validation, over-training, and the served app."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

import engine  # noqa: E402
from engine.probes import inference  # noqa: E402
from engine.probes.heads.joint_fill import joint_fill  # noqa: E402
from explorer.formatting import percent, plain_markdown  # noqa: E402
from explorer.models.choices import ModelChoice  # noqa: E402
from explorer.fill_mask import results as fill_results, tab  # noqa: E402
from explorer.services import Services  # noqa: E402
from explorer.ui_errors import friendly_errors  # noqa: E402
from support.event_helpers import failure_clears  # noqa: E402
from support.probing_helpers import STEPS, make_services, tab_app, write_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the cat [MASK] on the mat."
TWO = "the [MASK] sat on the [MASK]."


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_tokenizer) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("runs")
    return root, write_run(root, tiny_tokenizer)


@pytest.fixture(scope="module")
def services(runs, tiny_tokenizer) -> Services:
    return make_services(tiny_tokenizer, runs[0])


@pytest.fixture(scope="module")
def app(services) -> tuple[gr.Blocks, dict]:
    return tab_app(services, tab.build)



# --- handlers -------------------------------------------------------------------------------

def test_one_mask_outputs_equal_the_engine(services) -> None:
    fig, results, filled, summary, joint = tab.fill(services, "default", TEXT, 5, "")
    loaded = services.model("default")
    assert results == inference.fill_mask(loaded, TEXT, 5)
    assert isinstance(results, list) and len(results) == 5 and isinstance(results[0], dict)
    assert len(fig.data) == 1 and list(fig.data[0].x) == [r["score"] for r in results]
    assert list(fig.layout.yaxis.ticktext) == [r["token_str"] or loaded.tokenizer.id_to_token(r["token"])
                                               for r in results]
    best = results[0]
    assert filled == [("the cat ", None), (best["token_str"], percent(best["score"])), (" on the mat.", None)]
    assert "**1** `[MASK]` token" in summary and "top-5" in summary
    assert joint == ""                                                   # one mask: nothing to fill jointly
    assert fig.data[0].text[0] == percent(best["score"]) and fig.data[0].customdata[0][3] == percent(best["score"])


def test_several_masks_give_a_list_of_lists_and_subplots(services) -> None:
    fig, results, filled, _, _ = tab.fill(services, "default", TWO, 3, None)
    assert results == inference.fill_mask(services.model("default"), TWO, 3)
    assert len(results) == 2 and all(len(r) == 3 for r in results)
    assert len(fig.data) == 2 and fig.data[0].xaxis != fig.data[1].xaxis
    labelled = [(text, label) for text, label in filled if label]
    assert labelled == [(results[0][0]["token_str"], f"1: {percent(results[0][0]['score'])}"),
                        (results[1][0]["token_str"], f"2: {percent(results[1][0]['score'])}")]


def test_several_masks_show_the_joint_fill_in_order(services) -> None:
    *_, joint = tab.fill(services, "default", "the [MASK] [MASK] on the [MASK].", 3, "")
    expected = joint_fill(services.model("default"), "the [MASK] [MASK] on the [MASK].")
    lines = joint.splitlines()
    assert lines[0].startswith("**Filled together**: one mask at a time, the surest first")
    assert [line for line in lines if " → " in line] == [
        f"{s.step}. `[MASK]` {s.mask + 1} → `{s.token_str}` {percent(s.score)}" for s in expected.steps]
    assert f"**{plain_markdown(expected.sequence)}**" in lines
    assert f"{percent(expected.probability)} for this fill in this order" in joint
    assert "Targets are ignored" not in joint


@pytest.mark.filterwarnings("ignore:target")
def test_joint_fill_says_it_ignores_targets(services) -> None:
    *_, joint = tab.fill(services, "default", TWO, 3, "cat, mat")
    expected = joint_fill(services.model("default"), TWO)
    assert f"{percent(expected.probability)} for this fill" in joint
    assert joint.endswith("_Targets are ignored here: the joint fill ranks the whole vocabulary._")


def _ranges(fig) -> list[list[float]]:
    return [list(fig.layout[f"xaxis{i}"].range) for i in ("", "2")]


def test_the_chart_has_one_scale_for_every_mask_and_zoom_redraws_it_without_the_model(services) -> None:
    fig, results, *_ = tab.fill(services, "default", TWO, 3, "")
    top = max(r["score"] for mask in results for r in mask)
    assert _ranges(fig) == [[0.0, top], [0.0, top]] and fig.layout.xaxis.tickformat.endswith("%")
    shown = gr.Plot().postprocess(fig)                                   # the Plot's value, as the page holds it
    zoomed = tab.zoomed_plot(shown, True)
    assert _ranges(zoomed) == [[0.0, mask[0]["score"]] for mask in results]
    assert "own scale" in zoomed.layout.xaxis.title.text
    assert [b.x for b in zoomed.data] == [b.x for b in fig.data]          # the same bars, only the axes move
    back = tab.zoomed_plot(gr.Plot().postprocess(zoomed), False)
    assert _ranges(back) == _ranges(fig) and back.layout.xaxis.title.text == "probability"
    assert tab.zoomed_plot(shown.model_dump(), True).layout.xaxis2.range == zoomed.layout.xaxis2.range   # as JSON
    for nothing in (None, {"type": "plotly", "plot": "not a figure"}, {"plot": None}):
        assert tab.zoomed_plot(nothing, True) == gr.skip()


def test_the_zoom_box_redraws_the_chart_and_a_new_chart_follows_it(app, services) -> None:
    demo, w = app
    assert "own values" in w["zoom"].label
    deps = demo.get_config_file()["dependencies"]
    by_name = {d["api_name"]: d for d in deps}
    box = by_name["fill_mask_zoom"]
    assert [tuple(t) for t in box["targets"]] == [(w["zoom"]._id, "change")]
    assert box["inputs"] == [w["plot"]._id, w["zoom"]._id] and box["outputs"] == [w["plot"]._id]
    assert w["zoom"]._id not in by_name["fill_mask"]["inputs"]          # /fill_mask's API is unchanged
    for name in ("fill_mask", "fill_mask_submit", "fill_mask_example_run"):
        follow = by_name[f"{name}_then_zoom"]
        assert follow["trigger_after"] == by_name[name]["id"] and follow["trigger_only_on_success"]
        assert follow["api_visibility"] == "private" and follow["inputs"] == box["inputs"]
    fig, *_ = tab.fill(services, "default", TWO, 3, "")
    shown = gr.Plot().postprocess(fig)
    redraw, follow = demo.fns[box["id"]].fn, demo.fns[by_name["fill_mask_then_zoom"]["id"]].fn
    assert redraw(shown, True).layout.xaxis.range != redraw(shown, True).layout.xaxis2.range
    assert follow(shown, False) == gr.skip()                            # unticked: the new chart stays as drawn
    assert follow(shown, True).layout.xaxis2.range == redraw(shown, True).layout.xaxis2.range


def test_every_user_event_clears_its_outputs_on_failure(app) -> None:
    demo, w = app
    outputs = [w["plot"], w["results"], w["filled"], w["summary"], w["joint"]]
    for name in ("fill_mask", "fill_mask_submit", "fill_mask_example_run"):
        assert failure_clears(demo, name, outputs), name
    assert failure_clears(demo, "fill_mask_over_training", [w["over_plot"], w["over_table"], w["over_note"]])


@pytest.mark.filterwarnings("ignore:target 'zzzq'")   # gr.Warning outside a request is a UserWarning
def test_targets_and_other_mask_spellings(services) -> None:
    loaded = services.model("default")
    _, results, _, summary, _ = tab.fill(services, "default", "the <mask> sat on the mat.", 5, " cat, dog ,, bird ")
    assert results == inference.fill_mask(loaded, "the [MASK] sat on the mat.", 5, ["cat", "dog", "bird"])
    assert {r["token_str"] for r in results} == {"cat", "dog", "bird"}
    assert "targets:" in summary and "`cat`" in summary
    _, _, _, summary, _ = tab.fill(services, "default", TEXT, 5, "zzzq")   # not a word: its first piece is used
    assert "⚠️ target 'zzzq' is not in the vocabulary; using 'z'" in summary
    _, lower, _, _, _ = tab.fill(services, "default", "the [mask] sat on the mat.", 5, "")
    assert lower == inference.fill_mask(loaded, "the [MASK] sat on the mat.", 5)


@pytest.mark.parametrize("text,top_k,targets,match", [
    ("", 5, "", "Type a sentence with a \\[MASK\\]"),
    ("no mask here", 5, "", "There is no \\[MASK\\] in the text"),
    (" ".join(["[MASK]"] * 21), 5, "", "21 \\[MASK\\] tokens; at most 20"),
    (TEXT, 0, "", "Top-k must be a whole number from 1 to 50"),
    (TEXT, 51, "", "Top-k must be a whole number from 1 to 50"),
    (TEXT, 2.5, "", "Top-k must be a whole number"),
    (TEXT, "x", "", "Top-k must be a whole number"),
    (" ".join(["cat"] * 80) + " [MASK]", 5, "", "at most 64"),       # longer than the model's positions
    (TEXT, 5, "\U0001F600", "not in the vocabulary: it tokenizes to \\[UNK\\]"),
])
def test_bad_input_is_a_clear_error(services, text, top_k, targets, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(tab.fill)(services, "default", text, top_k, targets)


def test_model_without_mlm_head(services) -> None:
    with pytest.raises(gr.Error, match="has no masked-LM head"):
        friendly_errors(tab.fill)(services, "encoder", TEXT, 5, "")


def test_pick_evenly_keeps_first_and_last() -> None:
    choices = [ModelChoice(f"k{i}", f"l{i}", "checkpoint", i) for i in range(20)]
    picked = [c.step for c in tab.pick_evenly(choices, 6)]
    assert len(picked) == 6 and picked[0] == 0 and picked[-1] == 19 and picked == sorted(picked)
    assert tab.pick_evenly(choices[:3], 6) == choices[:3]


def test_over_training_equals_the_engine(services, runs) -> None:
    fig, table, note = tab.over_training(services, "default", TWO, 3, "")
    expected = inference.fill_mask_over_checkpoints([engine.load(p) for p in runs[1]], TWO, 3)
    assert list(table.columns) == ["mask", "token"] + [f"step {s}" for s in STEPS]
    for m in range(2):
        tracked = [result.masks[m].tracked for _, result in expected]
        rows = table[table["mask"] == f"[MASK] {m + 1}"]
        assert set(rows["token"]) == set(tracked[0])
        for _, row in rows.iterrows():
            assert [row[f"step {s}"] for s in STEPS] == [percent(t[row["token"]]) for t in tracked]   # "0.941%"
        lines = [t for t in fig.data if t.name.startswith(f"{m + 1}: ")]
        assert lines and all(list(t.x) == list(STEPS) for t in lines)
        for line in lines:
            assert list(line.y) == pytest.approx([t[line.name[3:]] for t in tracked], abs=1e-6)
    assert note.startswith("Run **run-a** (3 checkpoints, steps 2–6): showing 3 (steps 2, 4, 6)")
    _, _, named = tab.over_training(services, "default", TWO, 3, "", run="run-a")
    assert named == note
    with pytest.raises(ValueError, match="The run 'other' has no checkpoints. Runs with checkpoints now: run-a"):
        tab.over_training(services, "default", TWO, 3, "", run="other")


def test_over_training_needs_two_checkpoints(tiny_tokenizer, tmp_path) -> None:
    write_run(tmp_path, tiny_tokenizer, steps=(2,))
    lonely = make_services(tiny_tokenizer, tmp_path)
    with pytest.raises(gr.Error, match="at least 2 saved checkpoints; found 1"):
        tab.over_training(lonely, "default", TEXT, 5, "")
    with pytest.raises(gr.Error, match="found 0"):
        tab.over_training(make_services(tiny_tokenizer, None), "default", TEXT, 5, "")


# --- through the server ------------------------------------------------------------------

def test_api_fill_mask(client, services) -> None:
    plot, results, filled, summary, joint = client.predict("default", TWO, 4, "", api_name="/fill_mask")
    assert results == inference.fill_mask(services.model("default"), TWO, 4)
    assert joint == fill_results.joint_markdown(joint_fill(services.model("default"), TWO), "[MASK]")
    assert plot["type"] == "plotly"
    assert [h["class_or_confidence"] for h in filled if h["class_or_confidence"]][0].startswith("1: ")
    assert "**2** `[MASK]` tokens" in summary


def test_api_fill_mask_over_training(client) -> None:
    plot, table, note = client.predict("default", TEXT, 3, "", api_name="/fill_mask_over_training")
    assert table["headers"] == ["mask", "token"] + [f"step {s}" for s in STEPS]
    assert len(table["data"]) >= 3 and plot["type"] == "plotly" and "run-a" in note
    # a checkpoint key picks its own run
    _, table, _ = client.predict(f"checkpoint:run-a/step-{STEPS[0]:06d}", TEXT, 3, "",
                                 api_name="/fill_mask_over_training")
    assert table["headers"][2:] == [f"step {s}" for s in STEPS]


def test_api_errors_and_app_keeps_serving(client) -> None:
    with pytest.raises(AppError, match="There is no \\[MASK\\]"):
        client.predict("default", "nothing to fill", 5, "", api_name="/fill_mask")
    with pytest.raises(AppError, match="has no masked-LM head"):
        client.predict("encoder", TEXT, 5, "", api_name="/fill_mask")
    with pytest.raises(AppError):
        client.predict("default", TEXT, 99, "", api_name="/fill_mask")      # the slider's own range check
    _, results, _, _, joint = client.predict("default", TEXT, 2, "", api_name="/fill_mask")
    assert len(results) == 2 and joint == ""
