"""Tokenize tab: type text (and optionally a second segment), see its WordPiece pieces."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from engine.model.loaded_model import LoadedModel
from engine.probes import inference
from engine.text.token_explain import Explanation
from engine.text.tokenizer import WordPieceTokenizer
from explorer import plots
from explorer.endpoints import wire_run
from explorer.formatting import percent
from explorer.glossary import gloss
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.tokenize.pieces import pieces_html
from explorer.ui_errors import check_length, require_text, whole_number
from explorer.views.plot_names import named_for

TABLE_COLUMNS = ["index", "token", "id", "type id", "start", "end", "text", "special", "word id", "segment"]
TABLE_DATATYPES = ["number", "str", "number", "number", "number", "number", "str", "bool", "str", "str"]
MIN_LENGTH = 8
DEFAULT_LENGTH = 128
EMPTY_MESSAGE = "Type some text to tokenize."

EXAMPLES: list[list[str]] = [
    ["Tokenization splits embeddings into pieces.", ""],          # first: rare words in ## pieces
    ["UNwant\u00e9d, running!", ""],
    ["Who was Jim Henson?", "Jim Henson was a nice puppet"],
    ["Nice to [MASK] you.", ""],
    ["Caf\u00e9 na\u00efve fa\u00e7ade \U0001F600 \u6771\u4eac\u90fd is in \u65e5\u672c.", ""],
]

INTRO = f"""\
The text is normalised (lower-cased, accents stripped), split into words, and each word
into **{gloss("WordPiece")}** pieces from a fixed vocabulary: pieces starting with `##` continue the
word before them, and rare words break into several pieces (or {gloss("[UNK]", "[UNK]")}, the piece for text the
vocabulary cannot spell). A pair is laid out as `[CLS] A [SEP] B [SEP]`: each token belongs to a
{gloss("segment")}, type id 0 for `[CLS] A [SEP]` and 1 for `B [SEP]`.
Below: the pieces exactly as the model sees them (hover one for its position, id and the
characters it came from), then each position coloured by segment, which is what the segment
and {gloss("position embedding", "position embeddings")} see. Other families split differently: RoBERTa's
byte-level BPE and XLM-R's and ALBERT's SentencePiece mark where a word *starts* (shown here as `▁`) instead
of where it continues, and RoBERTa lays a pair out as `<s> A </s></s> B </s>` with no segment ids.
"""


def explanation_table(expl: Explanation) -> pd.DataFrame:
    """One row per token, columns ``TABLE_COLUMNS`` (word id is "" for specials)."""
    rows = [
        [r.index, r.token, r.id, r.type_id, r.start, r.end, r.text, bool(r.special),
         "" if r.word_id is None else str(r.word_id), r.segment]
        for r in expl.rows
    ]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def summary_markdown(expl: Explanation) -> str:
    """Counts, [UNK] rate, layout and a truncation notice as Markdown (rates as percentages)."""
    num_special = sum(1 for r in expl.rows if r.special)
    lines = [
        f"**{expl.num_tokens} tokens** ({num_special} special) from **{expl.num_words} words** · "
        f"**[UNK]**: {expl.num_unknown} ({percent(expl.unknown_rate)} of non-special tokens)",
        f"Layout: `{expl.layout}`",
    ]
    if expl.truncated:
        lines.append(
            f"⚠️ truncated: {expl.num_truncated_tokens} tokens dropped at max length {expl.max_length}"
        )
    return "\n\n".join(lines)


def segment_figure(expl: Explanation) -> go.Figure:
    """The segment/position strip for one explanation."""
    return plots.token_strip(
        tokens=[r.shown or r.token for r in expl.rows],
        segments=[r.segment for r in expl.rows],
        ids=[r.id for r in expl.rows],
        type_ids=[r.type_id for r in expl.rows],
    )


def tokenizer_for(services: Services, model_key: str | None) -> tuple[WordPieceTokenizer, int]:
    """The picked model's tokenizer and position limit; the bundled tokenizer when none is picked."""
    if not model_key:
        return services.tokenizer, min(512, services.max_length)
    loaded = services.model(model_key)
    return loaded.require_tokenizer(), min(loaded.config.max_tokens, services.max_length)


def tokenize(
    services: Services, model_key: str | None, text: str | None, text_pair: str | None,
    max_length: float | int | None,
) -> tuple[str, str, pd.DataFrame, go.Figure]:
    """Validate input, explain it with the picked model's tokenizer, and build the four outputs:
    the pieces as HTML, a Markdown summary, the token table and the segment strip."""
    text = require_text(text, empty_message=EMPTY_MESSAGE)
    pair = text_pair if text_pair and text_pair.strip() else None
    if pair is not None:
        check_length(pair, "text pair")
    tokenizer, limit = tokenizer_for(services, model_key)
    length = whole_number(max_length, "Max length", MIN_LENGTH, limit) if max_length is not None else DEFAULT_LENGTH
    expl = tokenizer.explain(text, text_pair=pair, max_length=length)
    unk = tokenizer.id_to_token(tokenizer.unk_token_id)
    source = services.model(model_key).source if model_key else "bundled tokenizer"
    strip = named_for(segment_figure(expl), source, text, "Segments and positions", pair)
    return pieces_html(expl, unk), summary_markdown(expl), explanation_table(expl), strip


def build(services: Services, picker: ModelPicker | None = None) -> dict[str, Any]:
    """Create the Tokenize tab's widgets inside the current ``gr.Tab`` and wire them.

    With a ``picker``, the picked model's tokenizer is used; without, the bundled one."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text", lines=3, placeholder="Type or paste text…")
            pair = gr.Textbox("", label="Text pair (optional, segment B)", lines=2,
                              placeholder="A second sentence makes a pair: [CLS] A [SEP] B [SEP]")
        with gr.Column(scale=1, min_width=220):
            length = gr.Slider(MIN_LENGTH, min(512, services.max_length), value=DEFAULT_LENGTH, step=1,
                               label="Max length (tokens, incl. specials)")
            button = gr.Button("Tokenize", variant="primary")
    examples = gr.Examples(examples=EXAMPLES, inputs=[text, pair], label="Examples",
                           cache_examples=False, api_name="tokenize_example", api_visibility="private")
    pieces = gr.HTML(label="Pieces the model sees", show_label=False, container=True, padding=True,
                     js_on_load=None, elem_classes=["wordpieces"])
    summary = gr.Markdown(elem_classes=["token-summary"])
    strip = gr.Plot(label="Segments and positions")
    table = gr.Dataframe(
        headers=TABLE_COLUMNS,
        datatype=TABLE_DATATYPES,
        label="Tokens",
        interactive=False,
        wrap=False,
        max_height=420,
    )

    def run(model_key: str | None, text: str, text_pair: str, max_length: float) -> tuple[Any, ...]:
        """Tokenize a text (and optional pair) with the model's WordPiece tokenizer.

        Args:
            model_key: the model key from the picker ('default', a checkpoint, ...); empty for the bundled tokenizer.
            text: the text to tokenize (segment A).
            text_pair: optional second text (segment B); empty for none.
            max_length: longest sequence in tokens, specials included (8..512).
        Returns:
            the pieces the model sees as HTML (one span per piece; its title holds the position, id and
            source characters), a Markdown summary, the token table and the segment strip.
        """
        return tokenize(services, model_key, text, text_pair, max_length)

    model = picker.dropdown if picker is not None else gr.State(None)
    wire_run(button, text, examples, run, [model, text, pair, length], [pieces, summary, table, strip],
             api_name="tokenize", gpu=False, show_progress="minimal")    # loads a model, runs none
    return {"text": text, "pair": pair, "length": length, "button": button,
            "pieces": pieces, "summary": summary, "table": table, "strip": strip}


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for each example on ``loaded``'s tokenizer (the demo warm-up runs them)."""
    return [(f"tokenize {i}", lambda t=text, p=pair: inference.tokenize(loaded, t, p or None))
            for i, (text, pair) in enumerate(EXAMPLES)]
