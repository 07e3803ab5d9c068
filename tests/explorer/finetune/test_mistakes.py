"""The Fine-tune tab's table of held-out mistakes: one row per wrong word for word tagging (the word, its expected
and predicted tag, the model's probability and a few words around it), one short row per wrong example for the
other tasks, text cut at spaces and never inside a word, fixed column widths that wrap so the table fits its box,
a caption that says what "confidence" is, and the whole input of a clicked row, escaped. A part-of-speech tag is
spelled out where a mistake shows it (``ADP (adposition)``; the note names each tag in full, the clicked row on hover);
named-entity tags stay as they are."""
from __future__ import annotations

import re

import gradio as gr
import pytest

from engine.training.tasks.eval_examples import EVAL_EXAMPLES, NO_ANSWER, EvalExamples, ExamplePrediction, WordMistake
from engine.training.worker.shared_state import WorkerStatus
from explorer.finetune import tab as finetune_tab
from explorer.finetune.mistakes import (CAPTION, COLUMN_WIDTHS, MAX_ANSWER_CHARS, MAX_TEXT_CHARS, PICK_HINT,
                                        WRONG_COLUMNS, cut, example_html, named, tag_key, word_in_context, wrong_note,
                                        wrong_rows)
from explorer.glossary import UPOS_NAMES, gloss
from support.finetune_tab_helpers import tiny_app_services
from support.probing_helpers import tab_app

SENTENCE = tuple("the old man walked his dog in the park after the long rain stopped".split())


def status(task: str) -> WorkerStatus:
    return WorkerStatus("running", "step 20 / 40", step=20, total_steps=40, task=task)


def tagged(index: int, wrong: dict[int, tuple[str, str, float]]) -> ExamplePrediction:
    """A tagging prediction of ``SENTENCE`` with the words at ``wrong``'s positions tagged wrong."""
    mistakes = tuple(WordMistake(i, SENTENCE[i], want, got, p) for i, (want, got, p) in sorted(wrong.items()))
    return ExamplePrediction(index, " ".join(SENTENCE), "", "", "", 0.0311, not mistakes, len(SENTENCE),
                             len(SENTENCE) - len(mistakes), SENTENCE, mistakes)


def example(index: int, correct: bool, text: str = "a fine film", context: str = "", expected: str = "positive",
            predicted: str = "negative") -> ExamplePrediction:
    return ExamplePrediction(index, text, context, expected, expected if correct else predicted, 0.8771, correct)


def test_word_tagging_has_one_row_per_wrong_word_with_the_words_around_it():
    examples = EvalExamples(20, "token_classification", [
        tagged(0, {}), tagged(1, {2: ("NOUN", "VERB", 0.412)}),
        tagged(4, {0: ("DET", "PRON", 0.5), 13: ("VERB", "NOUN", 0.0312)})])
    assert wrong_rows(examples) == [
        [2, "man: NOUN → VERB (41.2%)", "the old [man] walked his dog in …"],
        [5, "the: DET (determiner) → PRON (pronoun) (50%)", "[the] old man walked his …"],
        [5, "stopped: VERB → NOUN (3.12%)", "… after the long rain [stopped]"]]
    note = wrong_note(status("token_classification"), examples)
    assert note.startswith("Step 20: **3 of 42 words** tagged wrong, in 2 of 3 sentences (all 3 held-out sentences")
    assert "92.9% of their words are tagged right). One row per wrong word." in note
    assert note.endswith(f"The {gloss('UPOS')} tags here: **DET** {UPOS_NAMES['DET']} · **NOUN** noun · "
                         f"**PRON** pronoun · **VERB** verb.")


def test_part_of_speech_tags_are_spelled_out_and_entity_tags_stay_as_they_are():
    assert [named(t) for t in ("ADP", "CCONJ", "SCONJ", "PROPN", "X", "NOUN", "B-PER", "O")] == [
        "ADP (adposition)", "CCONJ (coordinating conjunction)", "SCONJ (subordinating conjunction)",
        "PROPN (proper noun)", "X (other)", "NOUN", "B-PER", "O"]
    examples = EvalExamples(20, "token_classification", [tagged(1, {6: ("ADP", "SCONJ", 0.6)})])
    assert wrong_rows(examples)[0][1] == "in: ADP (adposition) → SCONJ (subordinating conjunction) (60%)"
    assert f"**ADP** {UPOS_NAMES['ADP']} · **SCONJ** {UPOS_NAMES['SCONJ']}" in tag_key(examples)
    entities = EvalExamples(20, "token_classification", [tagged(1, {2: ("B-PER", "O", 0.7)})])
    assert wrong_rows(entities)[0][1] == "man: B-PER → O (70%)" and tag_key(entities) == ""
    assert "tags here" not in wrong_note(status("token_classification"), entities)


def test_other_tasks_have_one_short_row_per_wrong_example():
    classification = EvalExamples(20, "classification", [example(0, True), example(1, False), example(2, False)])
    assert wrong_rows(classification) == [[2, "positive → negative (87.7%)", "a fine film"],
                                          [3, "positive → negative (87.7%)", "a fine film"]]
    assert wrong_note(status("classification"), classification) == (
        "Step 20: **2 of 3** wrong (all 3 held-out examples are checked at each evaluation).")
    window = "the ball was red and the sky was blue " * 20
    qa = EvalExamples(5, "qa", [example(0, False, "what colour was the ball?", window, "red", NO_ANSWER)])
    (row,) = wrong_rows(qa)
    assert row[1] == f"“red” → {NO_ANSWER} (87.7%)"
    assert row[2].startswith("what colour was the ball? ‖ the ball")
    long_choice = "0: " + "and then they walked on " * 10
    choices = EvalExamples(5, "multiple_choice", [example(0, False, "they left.", "", long_choice, "2: they sang.")])
    (row,) = wrong_rows(choices)
    assert row[1].startswith("0: and then") and row[1].endswith(" … → 2: they sang. (87.7%)")
    right = EvalExamples(20, "classification", [example(i, True) for i in range(EVAL_EXAMPLES)])
    assert wrong_rows(right) == [] and "**none wrong**: the first 16 held-out examples are right" in wrong_note(
        status("classification"), right)
    assert wrong_rows(None) == [] and "No evaluation yet" in wrong_note(status("classification"), None)


@pytest.mark.parametrize("limit", [5, 12, 40, MAX_TEXT_CHARS, MAX_ANSWER_CHARS])
def test_text_is_cut_at_a_space_never_inside_a_word(limit: int):
    text = "Extraordinarily long sentences about the unbelievably complicated history of Mesopotamia " * 5
    words = set(text.split())
    shown = cut(text, limit)
    assert shown.endswith(" …") and len(shown) <= max(limit, len("Extraordinarily")) + 2
    assert set(shown.removesuffix(" …").split()) <= words          # every word shown is a whole word
    assert cut("short  text\n", 10) == "short text"
    assert cut("Supercalifragilistic word", 5) == "Supercalifragilistic …"


def test_a_word_in_context_marks_the_word_and_says_where_the_sentence_goes_on():
    assert word_in_context(SENTENCE, 2, around=1) == "… old [man] walked …"
    assert word_in_context(("just", "this"), 1) == "just [this]"


def test_the_table_has_fixed_widths_that_fill_its_box_and_a_caption_that_explains_confidence(tmp_path):
    assert len(COLUMN_WIDTHS) == len(WRONG_COLUMNS) == 3
    assert sum(float(w.rstrip("%")) for w in COLUMN_WIDTHS) == 100.0       # shares of the box, never wider
    assert "confidence" in CAPTION and "the model's probability for its own (wrong) answer" in CAPTION
    with tiny_app_services(tmp_path, ["the old man"]) as services:
        _, widgets = tab_app(services, finetune_tab.build)
    table = widgets["wrong"]
    assert isinstance(table, gr.Dataframe) and table.wrap and table.column_widths == COLUMN_WIDTHS
    assert table.headers == WRONG_COLUMNS and not table.interactive
    assert PICK_HINT in widgets["example"].value


def test_a_clicked_row_shows_its_whole_input_escaped():
    sentence = (*SENTENCE[:3], "<b>&</b>")
    mistake = WordMistake(3, "<b>&</b>", "SYM", "X", 0.25)
    tags = EvalExamples(7, "token_classification",
                        [ExamplePrediction(2, "", "", "", "", 0.1, False, 4, 3, sentence, (mistake,))])
    for number in (3, "3", 3.0):                        # as the table's row value may come back
        shown = example_html(tags, number)
        assert shown == ("<p><strong>Held-out example 3</strong>, step 7:</p>"
                         "<p>the old man <strong>&lt;b&gt;&amp;&lt;/b&gt;</strong> (<abbr title=\"SYM: symbol "
                         "(&#x27;$&#x27;, &#x27;%&#x27;, &#x27;:)&#x27;)\">SYM</abbr> → <abbr title=\"X: other (a foreign "
                         "word, a typo, a code)\">X</abbr>, 25%)</p>")
    qa = EvalExamples(5, "qa", [example(0, False, "why <i>?", "because", "because", NO_ANSWER)])
    shown = example_html(qa, 1)
    assert "question: why &lt;i&gt;?" in shown and "context: because" in shown and "<i>" not in shown
    assert f"predicted: <strong>{NO_ANSWER}</strong> (confidence 87.7%)" in shown
    for missing in (9, "x", None, float("inf"), ["1"]):
        assert example_html(qa, missing) == f"<p>{PICK_HINT} (That example is not among the latest predictions.)</p>"
    assert re.search("not among", example_html(None, 1))
