"""Heads tab, *Tag words*: every word coloured by the token-classification head's tag, with its probability."""
from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd

from engine.probes.heads.tag import TagResult, tag_details
from explorer.endpoints import wire_run
from explorer.formatting import percent, rounded
from explorer.glossary import gloss, upos_meaning
from explorer.heads.common import model_with_head
from explorer.heads.tag_html import color_classes, tagged_html
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.ui_errors import require_text

HEAD = "token_classifier"
API_NAME = "tag_words"
OUTPUTS = ("summary", "tagged", "table", "results")    # the widgets an answer fills, in the handler's order
TABLE_COLUMNS = ["word", "tag", "what the tag is", "probability", "start", "end"]
EXAMPLES: list[list[str]] = [
    ["The quick brown fox jumps over the lazy dog."],
    ["Angela Merkel visited Paris in July with her husband."],
    ["I would like to book a flight to New York tomorrow."],
]
INTRO = f"""\
The **token-classification head** gives every token a label: a part of speech (a {gloss("UPOS")} tag such as
`NOUN`, `VERB` or `ADP`, spelled out in the legend and when you hover a word) or a BIO entity tag
such as `B-PER`, `I-PER`, `O`. As the `transformers` token-classification pipeline with
`aggregation_strategy="first"`, a word takes the tag of its **first** word piece. With BIO tags,
adjacent words of one entity are merged (`B-PER I-PER` → one `PER`) and `O` stays plain; other tags
are shown word by word, each tag in its own colour. Fine-tune a model for
part-of-speech tagging in the Fine-tune tab to try it.
"""


def spans(result: TagResult) -> list[tuple[int, int, str, float]]:
    """What the view marks: the merged entities for BIO tags, else every word."""
    units = result.groups if result.bio else result.words
    return [(u.start, u.end, u.label, u.score) for u in units]


def words_table(result: TagResult) -> pd.DataFrame:
    """One row per word (its characters, first-piece tag, what a UPOS tag is ("" for another label), probability
    as a percentage, offsets)."""
    rows = [[result.text[w.start:w.end], w.label, upos_meaning(w.label), percent(w.score), w.start, w.end]
            for w in result.words]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def summary_markdown(result: TagResult) -> str:
    """Words, entities (BIO) and the model, in one line."""
    n = len(result.words)
    line = f"**{n} word{'s' if n != 1 else ''}** · {len(result.tokens)} tokens"
    if result.bio:
        found = len(result.to_pipeline())
        line += f" · **{found} entit{'y' if found == 1 else 'ies'}** (BIO tags merged; `O` not listed)"
    return line + f" · {len(result.labels)} labels · model: {result.source}"


def pipeline_json(result: TagResult) -> list[dict[str, Any]]:
    """The token-classification pipeline's output (``aggregation_strategy="first"``), scores to 3 significant digits."""
    return [{**row, "score": rounded(row["score"])} for row in result.to_pipeline()]


def predict(services: Services, model_key: str | None,
            text: str | None) -> tuple[str, str, pd.DataFrame, list[dict[str, Any]]]:
    """Validate, run ``tag_details`` and build the outputs: summary, tagged HTML, words table, pipeline JSON."""
    require_text(text, empty_message="Type a sentence to tag, e.g. 'The cat sat on the mat.'")
    with services.probing():
        loaded = model_with_head(services, model_key, HEAD)
        result = tag_details(loaded, text)
    html = tagged_html(result.text, spans(result), color_classes(result.labels))
    return summary_markdown(result), html, words_table(result), pipeline_json(result)


def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """The *Tag words* section's widgets (inside the current layout) and events."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    status = gr.Markdown()
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text", lines=2, placeholder="The quick brown fox jumps over the lazy dog.")
        with gr.Column(scale=1, min_width=200):
            button = gr.Button("Tag", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[text], label="Examples", cache_examples=False,
                           api_name=f"{API_NAME}_example", api_visibility="private")
    summary = gr.Markdown(elem_classes=["token-summary"])
    tagged = gr.HTML(label="Tagged words")
    with gr.Accordion("Every word: its tag, what the tag is, and its probability", open=False):
        table = gr.Dataframe(headers=TABLE_COLUMNS, label="Words", interactive=False, wrap=False, max_height=360)
    with gr.Accordion("Entities as JSON (the token-classification pipeline's format)", open=False):
        results = gr.JSON(label="token-classification output")

    def run(model_key: str, text: str) -> tuple[Any, ...]:
        """Tag every word of a text with the token-classification head.

        Args:
            model_key: the model (picker key, e.g. a fine-tuned checkpoint); it needs a token-classification head.
            text: the text to tag.
        Returns:
            a summary, the text as HTML with each tagged word (entity, for BIO tags) coloured and labelled,
            a table of every word's tag and probability, and [{"entity_group", "score", "word", "start", "end"}]
            as the transformers token-classification pipeline with aggregation_strategy="first" ("O" left out).
        """
        return predict(services, model_key, text)

    wire_run(button, text, examples, run, [picker.dropdown, text],
             [summary, tagged, table, results], api_name=API_NAME, show_progress="minimal")
    return {"status": status, "text": text, "button": button, "summary": summary, "tagged": tagged, "table": table,
            "results": results}
