"""QA tab: extract answer spans for a question from a context, with the windows and probabilities behind them."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from engine.model.loaded_model import LoadedModel
from engine.probes import inference
from engine.probes.heads.qa import QAResult, QASpan
from engine.probes.heads.qa_lengths import DEFAULT_DOC_STRIDE, DEFAULT_MAX_SEQ_LEN, QuestionTooLong
from explorer.endpoints import wire_run
from explorer.formatting import percent, rounded, sig
from explorer.glossary import gloss
from explorer.qa import kept, plots as qa_plots
from explorer.models.picker import ModelPicker
from explorer.qa.examples import EXAMPLES
from explorer.services import Services
from explorer.ui_errors import require_text, whole_number
from explorer.views.export_names import export_info
from explorer.views.plot_names import named

MAX_TOP_K = 20
MAX_ANSWER_LEN = 128
DEFAULT_MAX_ANSWER_LEN = 15
MIN_SEQ_LEN = 16
MAX_PLOT_WINDOWS = 6         # windows drawn in the probability chart (those with answers first)
_WORDS = re.compile(r"\s*\S+\s*|\s+")   # a word with the spaces around it, or spaces alone
TABLE_COLUMNS = ["rank", "answer", "probability", "where in the text", "window", "start token", "end token",
                 "pipeline score"]
TABLE_DATATYPES = ["number", "str", "str", "str", "str", "str", "str", "str"]
ALLOW_NULL_LABEL = "Allow no answer"

INTRO = f"""\
The QA head scores every context token twice, a start {gloss("logit")} and an end logit, turned into
p(start) and p(end) by a softmax. The answer is the span with the best p(start) × p(end) where start ≤ end and
it is at most *max answer length* tokens long. A long context is read in overlapping **windows** of
*max sequence length* tokens (sharing *{gloss("doc stride")}* tokens) and the best spans of all windows
compete. Each answer shows its own **probability** (its best window's p(start) × p(end), at most
100%) and **where** it is in the text. The `transformers` pipeline ranks by a *score* that adds up
every window's candidate with the same text, so one answer read by several overlapping windows
counts several times; that score (not a probability: it can pass 1) stays in the JSON and the
table's last column. The **{gloss("null score")}** p(start = `[CLS]`) × p(end = `[CLS]`) is the model's
"no answer"; tick *Allow no answer* to let it compete.
"""


def check_settings(top_k: Any, max_answer_len: Any, max_seq_len: Any, doc_stride: Any,
                   positions: int) -> tuple[int, int, int, int]:
    """Validate the four numbers as the pipeline does (and against the model's ``positions``)."""
    k = whole_number(top_k, "Top-k", 1, MAX_TOP_K)
    answer_len = whole_number(max_answer_len, "Max answer length", 1, MAX_ANSWER_LEN)
    seq_len = whole_number(max_seq_len, "Max sequence length", 4)
    if seq_len > positions:
        raise gr.Error(f"Max sequence length {seq_len} is more than this model's {positions} positions; "
                       f"set it to {positions} or less.", print_exception=False)
    stride = whole_number(doc_stride, "Doc stride", 0)
    if stride >= seq_len:
        raise gr.Error(f"Doc stride ({stride}) must be smaller than max sequence length ({seq_len}): windows "
                       "share doc-stride tokens, so each needs room for new ones.", print_exception=False)
    return k, answer_len, seq_len, stride


def answer_label(rank: int, probability: float) -> str:
    """"#1 · 53.2%": the answer's rank and its own probability."""
    return f"#{rank} · {percent(probability)}"


def places_text(span: QASpan) -> str:
    """Where an answer is in the context: "characters 10–15", or "2 places: characters 10–15, 300–305"."""
    ranges = ", ".join(f"{a}–{b}" for a, b in span.places)
    return f"characters {ranges}" if len(span.places) == 1 else f"{len(span.places)} places: characters {ranges}"


def answer_places(result: QAResult) -> list[tuple[int, int, str]]:
    """(start, end, label) of every place of every answer (not the null one), best answer first."""
    return [(a, b, answer_label(rank, s.probability)) for rank, s in enumerate(result.spans, start=1)
            if not s.is_null for a, b in s.places]


def answer_highlights(context: str, result: QAResult) -> list[tuple[str, str | None]]:
    """The context cut into pieces; pieces inside answers (at every place each was found) are labelled by
    rank and the answer's own probability.

    Where answers overlap, a piece carries every covering answer's label ("#1 · 50% | #3 · 10%").
    Unlabelled text comes word by word (with its spacing), so the component wraps it like prose.
    """
    spans = [(a, b, label) for a, b, label in answer_places(result) if b > a]
    cuts = sorted({0, len(context), *(a for a, _, _ in spans), *(b for _, b, _ in spans)})
    out: list[tuple[str, str | None]] = []
    for a, b in zip(cuts, cuts[1:]):
        covering = [label for start, end, label in spans if start <= a and b <= end]
        if covering:
            out.append((context[a:b], " | ".join(covering)))
        else:
            out += [(word, None) for word in _WORDS.findall(context[a:b])]
    return out


def pipeline_score_text(span: QASpan) -> str:
    """The pipeline's score as a plain number, and what it adds up ("1.96: 4 candidates added")."""
    added = f": {span.merged} candidates added" if span.merged > 1 else ""
    return f"{sig(span.score)}{added}"


def answers_table(result: QAResult) -> pd.DataFrame:
    """One row per answer, best first (columns ``TABLE_COLUMNS``): its own probability as a percentage, the
    places it was found, its best window and tokens, and the pipeline's score (a sum, not a probability)."""
    rows = []
    for rank, s in enumerate(result.spans, start=1):
        if s.is_null:
            rows.append([rank, "(no answer)", percent(s.probability), "", "", "", "", sig(s.score)])
            continue
        window = result.windows[s.best_window]
        rows.append([rank, s.answer or "(empty)", percent(s.probability), places_text(s), str(s.best_window + 1),
                     f"{s.best_start_token} {window.tokens[s.best_start_token]}",
                     f"{s.best_end_token} {window.tokens[s.best_end_token]}", pipeline_score_text(s)])
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def plot_windows(result: QAResult, cap: int = MAX_PLOT_WINDOWS) -> list[int]:
    """Which windows to draw: those holding answers (best first), then the others, at most ``cap``, in order."""
    order = list(dict.fromkeys([s.window for s in result.spans if not s.is_null]
                               + [w.index for w in result.windows]))
    return sorted(order[:cap])


def probabilities_plot(result: QAResult) -> go.Figure:
    """Start/end probabilities per window on one scale, each answer shaded where the window proposed it
    (labelled with its probability there)."""
    shown = plot_windows(result)
    data = []
    for index in shown:
        w = result.windows[index]
        where = {p: i for i, p in enumerate(w.context_positions)}      # window position -> context-token index
        answers = [(where[c.start_token], where[c.end_token], answer_label(rank, c.score))
                   for rank, s in enumerate(result.spans, start=1) if not s.is_null
                   for c in w.candidates if c.answer.lower() == s.answer.lower() and c.score > 0
                   and c.start_token in where and c.end_token in where]
        data.append(qa_plots.WindowProbs(index, w.context_tokens, w.start_probs, w.end_probs,
                                         w.context_offsets, answers))
    more = f" (showing {len(shown)} of {len(result.windows)} windows)" if len(shown) < len(result.windows) else ""
    return qa_plots.probabilities_figure(data, title=f"Start and end probabilities over the context tokens{more}")


def windows_plot(result: QAResult) -> go.Figure:
    """The character range of every window, answers shaded at every place they were found."""
    n = len(result.windows)
    return qa_plots.windows_figure(
        len(result.context), [(w.context_start, w.context_end) for w in result.windows], answer_places(result),
        title=f"{n} window{'s' if n != 1 else ''} of ≤ {result.max_seq_len} tokens, doc stride {result.doc_stride}")


def pipeline_json(result: QAResult) -> dict[str, Any] | list[dict[str, Any]]:
    """The answers in the pipeline's shape (one dict, or a list; ``score`` the pipeline's, rounded to 3
    significant digits), each with three added fields: ``probability`` (its own, <= 1), ``places`` (every
    [start, end] where it was found) and ``summed_candidates`` (how many candidates ``score`` adds up)."""
    answers = [{**a, "score": rounded(a["score"]), "probability": rounded(s.probability),
                "places": [list(place) for place in s.places], "summed_candidates": s.merged}
               for a, s in zip(result.answers, result.spans)]
    return answers[0] if len(answers) == 1 else answers


def null_verdict(result: QAResult) -> str:
    """The null ("no answer") score next to the best span, and which the model prefers, in words."""
    null, best = percent(result.null_score), percent(result.best_span_probability)
    if result.best_span_score > result.best_span_probability:
        best += f" (pipeline score {sig(result.best_span_score)}, a sum)"
    if result.handle_impossible_answer and result.impossible:
        return f"**No answer wins**: null {null} vs best span {best}; the model thinks the context does not answer."
    if result.handle_impossible_answer:
        return f"**A span wins** over no answer: best span {best} vs null {null}."
    if result.prefers_null:
        return (f"**The model prefers no answer**: null {null} vs best span {best}; "
                f"tick '{ALLOW_NULL_LABEL}' to accept it.")
    return f"The model prefers a span: best span {best} vs null {null} (no answer)."


def summary_markdown(result: QAResult, source: str) -> str:
    """Windows, question length, the best answer, and the null score against the best span (always)."""
    n = len(result.windows)
    windows = f"**{n} window{'s' if n != 1 else ''}**"
    lines = [f"{windows} · question {len(result.question_tokens)} tokens · model: {source}"]
    best = result.spans[0] if result.spans else None
    if best is None or best.is_null:
        lines.append("Best answer: **no answer**")
    else:
        lines.append(f"Best answer: **{best.answer}** (probability {percent(best.probability)} in window "
                     f"{best.best_window + 1}; {places_text(best)})")
    lines.append(null_verdict(result) + " Null score = p_start([CLS]) × p_end([CLS]), the lowest over windows.")
    if any(s.merged > 1 for s in result.spans):
        lines.append("The pipeline adds up every candidate with the same text into its score (in the JSON and the "
                     "table's last column): the same words at another place, and the same place read again by an "
                     "overlapping window. So that score is not a probability and can pass 1; each probability shown "
                     "here is the answer's own, in its best window.")
    if any(s.score == 0 and not s.is_null for s in result.spans):
        lines.append("Answers scoring 0% are not real spans: the context has fewer candidates than asked for, and "
                     "the pipeline fills the rest with empty ones.")
    return "\n\n".join(lines)


def fit_lengths(services: Services, model_key: str | None, max_seq_len: Any, doc_stride: Any) -> tuple[Any, Any]:
    """Slider updates that keep max sequence length within the chosen model's positions."""
    try:
        with services.probing():
            positions = services.model(model_key).config.max_tokens
        seq_len, stride = int(max_seq_len), int(doc_stride)
    except Exception:  # noqa: BLE001 - a picker problem is reported by the picker itself
        return gr.skip(), gr.skip()
    if seq_len <= positions and stride < seq_len:
        return gr.skip(), gr.skip()
    seq_len = min(seq_len, positions)
    stride = stride if stride < seq_len else min(seq_len // 2, DEFAULT_DOC_STRIDE)   # the pipeline's default
    return gr.update(value=seq_len), gr.update(value=stride)


def answer_question(services: Services, model_key: str | None, question: str | None, context: str | None,
                    top_k: Any, max_answer_len: Any, max_seq_len: Any, doc_stride: Any,
                    handle_impossible_answer: bool) -> tuple[Any, ...]:
    """Validate, run ``inference.answer_details`` once per input (``explorer/qa/kept.py``: a Top-k, max answer
    length or allow-no-answer change picks from the kept logits) and build the six outputs."""
    question = require_text(question, "question", "Type a question.")
    context = require_text(context, "context", "Paste a context: the text that holds the answer.")
    with services.probing():
        loaded = services.model(model_key)
        loaded.require_head("qa")
        k, answer_len, seq_len, stride = check_settings(top_k, max_answer_len, max_seq_len, doc_stride,
                                                        loaded.config.max_tokens)
        try:
            result = kept.answer_details(services, loaded, question, context, k, answer_len, seq_len, stride,
                                         bool(handle_impossible_answer))     # settings changes run no model
        except QuestionTooLong as e:
            raise gr.Error(f"The question is {e.tokens} tokens long, which leaves no room for the context: with max "
                           f"sequence length {e.max_seq_len} and doc stride {e.doc_stride} it may have at most "
                           f"{e.limit} tokens, so shorten the question, lower the doc stride or raise the max "
                           "sequence length.", print_exception=False) from None
    info = export_info(loaded.source, question, context)           # the charts' export names
    return (answer_highlights(context, result), pipeline_json(result), answers_table(result),
            named(probabilities_plot(result), info, "Start and end probabilities"),
            named(windows_plot(result), info, "Windows over the context"), summary_markdown(result, loaded.source))


def _run_handler(services: Services) -> Callable[..., tuple[Any, ...]]:
    """The tab's main action (its button, Enter and the examples)."""
    def run(model_key: str, question: str, context: str, top_k: float, max_answer_len: float,
            max_seq_len: float, doc_stride: float, handle_impossible_answer: bool) -> tuple[Any, ...]:
        """Extract the answer to a question from a context with the model's QA head.

        Args:
            model_key: the model (picker key, e.g. "default").
            question: the question.
            context: the text that holds the answer.
            top_k: how many answers (1..20).
            max_answer_len: longest answer in tokens.
            max_seq_len: tokens per window (at most the model's positions).
            doc_stride: tokens shared by neighbouring windows (< max_seq_len).
            handle_impossible_answer: let "no answer" compete with the spans.
        Returns:
            the context with answers highlighted, the pipeline-shaped answers (the pipeline's
            score, a sum over windows, to 3 significant digits, plus each answer's own probability,
            its places and how many candidates the score adds up), a table (probabilities as
            percentages), the start/end probability chart, the windows chart and a summary with
            the null score against the best span.
        """
        return answer_question(services, model_key, question, context, top_k, max_answer_len, max_seq_len,
                               doc_stride, handle_impossible_answer)

    return run


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the QA tab's widgets inside the current ``gr.Tab`` and wire them."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    with gr.Row():
        with gr.Column(scale=3):
            question = gr.Textbox(label="Question", max_lines=2, placeholder="Who was Jim Henson?")
            context = gr.Textbox(label="Context", lines=6, placeholder="The text that holds the answer…")
        with gr.Column(scale=1, min_width=240):
            top_k = gr.Slider(1, MAX_TOP_K, value=1, step=1, label="Top-k answers")
            max_answer_len = gr.Slider(1, MAX_ANSWER_LEN, value=DEFAULT_MAX_ANSWER_LEN, step=1,
                                       label="Max answer length (tokens)")
            max_seq_len = gr.Slider(MIN_SEQ_LEN, services.max_length, value=min(DEFAULT_MAX_SEQ_LEN,
                                    services.max_length), step=1, label="Max sequence length (tokens per window)")
            doc_stride = gr.Slider(0, services.max_length - 1, value=DEFAULT_DOC_STRIDE, step=1,
                                   label="Doc stride (tokens shared by neighbouring windows)")
            impossible = gr.Checkbox(label=ALLOW_NULL_LABEL, value=False,
                                     info="handle_impossible_answer: the null score competes with the spans")
            button = gr.Button("Answer", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[question, context], label="Examples", cache_examples=False,
                           api_name="answer_example", api_visibility="private")
    highlights = gr.HighlightedText(label="Answers in the context (rank · probability)", show_legend=False,
                                    show_inline_category=True, combine_adjacent=False)
    summary = gr.Markdown(elem_classes=["token-summary"])
    table = gr.Dataframe(headers=TABLE_COLUMNS, datatype=TABLE_DATATYPES, label="Top answers",
                         interactive=False, wrap=True, max_height=320)
    probs = gr.Plot(label="Start and end probabilities")
    windows = gr.Plot(label="Windows over the context")
    with gr.Accordion("Answers as JSON (the transformers question-answering pipeline's format, plus 3 fields)",
                      open=False):
        gr.Markdown("`score` is the pipeline's: the sum over every window's candidate with this text (not a "
                    "probability); added here: `probability` (the answer's own), `places` and `summed_candidates`.")
        answers = gr.JSON(label="question-answering output")

    inputs = [picker.dropdown, question, context, top_k, max_answer_len, max_seq_len, doc_stride, impossible]
    wire_run(button, question, examples, _run_handler(services), inputs,
             [highlights, answers, table, probs, windows, summary],
             api_name="answer", show_progress="minimal")   # an old answer never stays under a new error
    picker.dropdown.change(lambda key, seq, stride: fit_lengths(services, key, seq, stride),
                           inputs=[picker.dropdown, max_seq_len, doc_stride], outputs=[max_seq_len, doc_stride],
                           api_visibility="private", show_progress="hidden")
    return {"question": question, "context": context, "top_k": top_k, "max_answer_len": max_answer_len,
            "max_seq_len": max_seq_len, "doc_stride": doc_stride, "impossible": impossible, "button": button,
            "highlights": highlights, "answers": answers, "table": table, "probs": probs, "windows": windows,
            "summary": summary}


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for each example, when ``loaded`` has a QA head (the demo warm-up runs them)."""
    if "qa" not in loaded.heads:
        return []
    return [(f"answer {i}", lambda q=question, c=context: inference.answer(loaded, q, c))
            for i, (question, context) in enumerate(EXAMPLES)]
