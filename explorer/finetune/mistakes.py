"""The Fine-tune tab's table of held-out mistakes: one row per wrong word (word tagging) or per wrong example
(classification, QA, multiple choice), short enough to fit its box, and the whole input on demand.

A row is ``[#, mistake, in context]``: the held-out example's number; ``expected → predicted (confidence)``
(tagging: ``word: expected → predicted (confidence)``, a part-of-speech (UPOS) tag with its name, as
``ADP (adposition)``, the note above the table spelling out each tag it shows); and a short piece of the input
(tagging: a few words either side of the wrong word, which is in brackets). Long text is cut at a space, never
inside a word. The table's columns have fixed widths (``COLUMN_WIDTHS``) and wrap, so it never grows wider than
its box.
Clicking a row shows that example's whole input (``example_html``) under the table. The predictions come
from the worker (``engine.training.tasks.eval_examples``); nothing here runs a model.
"""
from __future__ import annotations

import html
from typing import Any

from engine.training.tasks.eval_examples import EVAL_EXAMPLES, EvalExamples, ExamplePrediction
from engine.training.worker.shared_state import WorkerStatus
from explorer.finetune.status import is_finetuning
from explorer.finetune.tasks import FinetuneTask, finetune_rows
from explorer.formatting import percent
from explorer.glossary import gloss, upos_meaning, upos_short

WRONG_COLUMNS = ["#", "mistake", "in context"]
COLUMN_WIDTHS = ["10%", "36%", "54%"]   # of the table's box: it wraps its text instead of growing wider
MAX_TEXT_CHARS = 200                     # an input is cut (at a space) to about this many characters
MAX_ANSWER_CHARS = 80                    # an answer (a span, a choice) is cut to about this many
CONTEXT_WORDS = 4                        # words shown either side of a wrongly tagged word
CAPTION = ("**confidence** (the % in brackets) = the model's probability for its own (wrong) answer: high means "
           "it is sure and still wrong. **#** is the example's place in the held-out data. Click a row to see "
           "its whole input.")
PICK_HINT = "Click a row of the table to see its example's whole input here."
NOTE_FIRST = "The held-out examples a fine-tuning run gets wrong appear here after each evaluation."


def cut(text: str, limit: int) -> str:
    """``text`` (its whitespace made single spaces) cut at its last space within ``limit`` characters, never inside
    a word, and " …" added when cut; a first word longer than ``limit`` is kept whole."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit + 1]
    space = head.rfind(" ")
    return (head[:space] if space > 0 else text.split(" ", 1)[0]).rstrip() + " …"


def _answer(text: str) -> str:
    """A QA span in quotes (the no-answer message as it is), cut."""
    return text if text.startswith("(") else f"“{cut(text, MAX_ANSWER_CHARS)}”"


def _example_row(p: ExamplePrediction, row: FinetuneTask | None) -> list[Any]:
    """One row for a wrong classification, QA or multiple-choice example."""
    expected, predicted, context = cut(p.expected, MAX_ANSWER_CHARS), cut(p.predicted, MAX_ANSWER_CHARS), p.text
    if row is not None and row.spans:       # QA: the answers are quoted spans of the window shown with the question
        expected, predicted = _answer(p.expected), _answer(p.predicted)
        context = f"{p.text} ‖ {p.context}"
    return [p.index + 1, f"{expected} → {predicted} ({percent(p.confidence)})", cut(context, MAX_TEXT_CHARS)]


def named(tag: str) -> str:
    """A UPOS tag with its short name, ``ADP`` → ``ADP (adposition)`` (``NOUN``, whose name is ``noun``, and a
    named-entity tag such as ``B-PER`` as they are)."""
    name = upos_short(tag)
    return f"{tag} ({name})" if name and name != tag.lower() else tag


def tag_key(examples: EvalExamples | None) -> str:
    """Markdown: each part-of-speech (UPOS) tag the wrong words are or should be, spelled out ("" when none is)."""
    tags = sorted({t for p in (examples.wrong if examples is not None else []) for m in p.mistakes
                   for t in (m.expected, m.predicted) if upos_meaning(t)})
    if not tags:
        return ""
    return (f"The {gloss('UPOS')} tags here: " + " · ".join(f"**{t}** {upos_meaning(t)}" for t in tags)
            + ".")


def word_in_context(words: tuple[str, ...], position: int, around: int = CONTEXT_WORDS) -> str:
    """The word at ``position`` in brackets with up to ``around`` words either side ("…" where the sentence
    goes on)."""
    start, end = max(0, position - around), min(len(words), position + around + 1)
    shown = [*words[start:position], f"[{words[position]}]", *words[position + 1:end]]
    return ("… " if start > 0 else "") + " ".join(shown) + (" …" if end < len(words) else "")


def wrong_rows(examples: EvalExamples | None) -> list[list[Any]]:
    """``[#, mistake, in context]`` for each wrong word (word tagging) or each wrong example (other tasks)."""
    if examples is None:
        return []
    rows = []
    for p in examples.wrong:
        if p.mistakes:
            rows += [[p.index + 1, f"{m.word}: {named(m.expected)} → {named(m.predicted)} "
                      f"({percent(m.confidence)})", word_in_context(p.sentence, m.position)] for m in p.mistakes]
        else:
            rows.append(_example_row(p, finetune_rows().get(examples.task)))
    return rows


def wrong_note(st: WorkerStatus, examples: EvalExamples | None) -> str:
    """Markdown above the table: at which step, how many of how many held-out examples (words) are wrong."""
    if not is_finetuning(st):
        return NOTE_FIRST
    if examples is None:
        if st.active:
            return "No evaluation yet: the table fills at the first one."
        return "This run made no held-out predictions (no examples were held out)."
    n, wrong = len(examples.predictions), len(examples.wrong)
    row = finetune_rows().get(st.task)
    unit = row.unit if row is not None else "examples"
    checked = f"the first {EVAL_EXAMPLES} held-out {unit}" if n == EVAL_EXAMPLES else f"all {n} held-out {unit}"
    if wrong == 0:
        return f"Step {examples.step}: **none wrong**: {checked} are right."
    words = sum(p.words for p in examples.predictions)
    if words:                               # word tagging: scored by word, one row per wrong word
        right = sum(p.words_right for p in examples.predictions)
        return (f"Step {examples.step}: **{words - right:,} of {words:,} words** tagged wrong, in {wrong} of {n} "
                f"{unit} ({checked} are checked at each evaluation; {percent(right / words)} of their words are "
                "tagged right). One row per wrong word." + (f"\n\n{key}" if (key := tag_key(examples)) else ""))
    return f"Step {examples.step}: **{wrong} of {n}** wrong ({checked} are checked at each evaluation)."


def _tag_html(tag: str) -> str:
    """A tag, escaped; a UPOS tag as ``<abbr>`` whose hover title is its name."""
    name = upos_meaning(tag)
    return (f'<abbr title="{html.escape(tag)}: {html.escape(name, quote=True)}">{html.escape(tag)}</abbr>' if name
            else html.escape(tag))


def _marked_sentence(p: ExamplePrediction) -> str:
    """The sentence's words, each wrong one in bold with ``(expected → predicted, confidence)`` (a UPOS tag's name
    on hover); escaped."""
    wrong = {m.position: m for m in p.mistakes}
    parts = []
    for position, word in enumerate(p.sentence):
        m = wrong.get(position)
        parts.append(html.escape(word) if m is None else
                     f"<strong>{html.escape(word)}</strong> ({_tag_html(m.expected)} → "
                     f"{_tag_html(m.predicted)}, {percent(m.confidence)})")
    return " ".join(parts)


def example_html(examples: EvalExamples | None, number: Any) -> str:
    """HTML: the whole input of held-out example ``number`` (the table's "#") with what was expected and what
    the model answered; a sentence saying so when it is not among the latest predictions. Text is escaped."""
    try:
        wanted = int(float(str(number).strip())) - 1
    except (ValueError, OverflowError):
        wanted = -1
    p = next((p for p in (examples.predictions if examples is not None else []) if p.index == wanted), None)
    if examples is None or p is None:
        return f"<p>{PICK_HINT} (That example is not among the latest predictions.)</p>"
    head = f"<p><strong>Held-out example {p.index + 1}</strong>, step {examples.step}:</p>"
    if p.sentence:
        return head + f"<p>{_marked_sentence(p)}</p>"
    row = finetune_rows().get(examples.task)
    text_name, context_name = row.parts if row is not None else ("input", "context")
    lines = [f"{text_name}: {html.escape(p.text)}"]
    if p.context:
        lines.append(f"{context_name or 'context'}: {html.escape(p.context)}")
    lines += [f"expected: <strong>{html.escape(p.expected)}</strong>",
              f"predicted: <strong>{html.escape(p.predicted)}</strong> (confidence {percent(p.confidence)})"]
    return head + "".join(f"<p>{line}</p>" for line in lines)
