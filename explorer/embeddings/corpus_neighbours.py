"""Embeddings tab, *Nearest contextual neighbours in a corpus* (exBERT's idea; ``engine.probes.representations.neighbours``).

Build an index of a corpus at one layer (the bundled *two senses* corpus, the built-in Shakespeare, or your own
text; with a progress bar,
the training run pausing meanwhile like for any probe), then pick a token of a sentence of your own and
see the corpus tokens the model represents most alike, each in its sentence. Indexes are kept per model
and layer (the newest ``MAX_INDEXES``), for every session: ``/neighbours`` searches the one that
``/neighbours_index`` built.
"""
from __future__ import annotations

import functools
import html
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from engine.probes.representations.neighbours import MAX_SENTENCES, ContextIndex, NeighbourResult, build_index, nearest
from engine.text.builtin_corpus import builtin_corpus
from engine.text.documents import read_documents
from engine.text.sentences import split_sentences
from explorer.endpoints import endpoint, wire_run
from explorer.formatting import sig
from explorer.embeddings.sections import LAYER_NOTE
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.ui_errors import check_length, require_text, whole_number

TWO_SENSES = "two-senses"
TWO_SENSES_FILE = Path(__file__).resolve().parents[2] / "assets" / "corpora" / "two-senses.txt"
SOURCES = [("Two senses: bank, bat, bark, spring, pitch… (built in, 318 sentences)", TWO_SENSES),
           ("Shakespeare's plays (built in)", "shakespeare"), ("My own text (below)", "text"),
           ("A file (.txt, .md, .jsonl)", "file")]
MAX_FILE_MB = 10
DEFAULT_SENTENCES = 500
DEFAULT_LAYER = 4             # where the default model tells the senses of "bank" apart (docs/design/neighbours.md)
CONTEXT_CHARS = 80            # characters shown each side of a neighbour
MAX_INDEXES = 4
QUERY_EXAMPLES = ["We sat on the grassy bank of the river.", "I took my money to the bank."]   # "bank", two senses
EXAMPLE_WORD = "bank"          # the token chosen until you choose one (kept when the sentence changes)
INTRO = ("**Nearest contextual neighbours** (exBERT's idea): the model's vector of one token *in its sentence* "
         "is compared, by cosine similarity, with the vectors of every token of a corpus at the same layer. Build "
         "an index of a corpus once, then choose a token: its neighbours come with their sentences, so you can see "
         "which *sense* of a word the model has in mind.\n\n"
         "**Try it:** keep the built-in *Two senses* corpus (318 short sentences written for this app: \"bank\" "
         "by a river in 67 of them, \"bank\" that keeps and lends money in 62, and bat, bark, spring, pitch, "
         "match, light, crane, seal, … in both their senses) and layer 4, press *Build the index* (about ten seconds on 2 cores), "
         "then pick each example below and press *Find neighbours*. With the default model, \"bank\" of the "
         "river finds river sentences and \"bank\" of the money finds money sentences (at layer 4 all ten "
         "nearest; at any layer from 1 to 6 the two nearest). At layer 0, the embeddings' output, \"bank\" is nearly the same vector in every "
         "sentence (only its position differs), so the two senses mix there.")


class IndexShelf:
    """The newest ``MAX_INDEXES`` indexes, by (model, layer); shared by every session, thread-safe."""

    def __init__(self) -> None:
        self._indexes: OrderedDict[tuple[str, int], ContextIndex] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, index: ContextIndex) -> None:
        with self._lock:
            self._indexes[(index.source, index.layer)] = index
            self._indexes.move_to_end((index.source, index.layer))
            while len(self._indexes) > MAX_INDEXES:
                self._indexes.popitem(last=False)

    def get(self, source: str, layer: int) -> ContextIndex | None:
        with self._lock:
            return self._indexes.get((source, layer))


def corpus_sentences(source: str, text: str | None, limit: int, file: str | None = None) -> list[str]:
    """The first ``limit`` sentences of the chosen corpus: the built-in one, pasted text, or an uploaded file
    (read and checked as a pretraining corpus is: ``engine.text.documents.read_documents``)."""
    if source == TWO_SENSES:
        sentences = list(two_senses_sentences())
    elif source == "shakespeare":
        sentences: list[str] = []
        for document in builtin_corpus("shakespeare"):
            sentences.extend(document)
            if len(sentences) >= limit:
                break
    elif source == "text":
        require_text(text, "corpus text", empty_message="Paste the text to index (a few sentences at least), "
                                                        "or choose the built-in corpus.")
        sentences = split_sentences(text or "")
    elif source == "file":
        if not file:
            raise gr.Error("Upload a .txt, .md or .jsonl file, or choose another corpus.", print_exception=False)
        name = Path(file).name
        try:
            documents = read_documents(file, max_bytes=MAX_FILE_MB * 1024 * 1024)
        except FileNotFoundError:
            raise gr.Error(f"{name} did not arrive (the upload is gone); upload it again.",
                           print_exception=False) from None
        except ValueError as exc:
            raise gr.Error(str(exc).replace(str(file), name), print_exception=False) from None
        sentences = [sentence for document in documents for sentence in document]
    else:
        raise gr.Error(f"Unknown corpus {source!r}: choose {' or '.join(v for _, v in SOURCES)}.",
                       print_exception=False)
    return sentences[:limit]


@functools.lru_cache(maxsize=1)
def two_senses_sentences() -> tuple[str, ...]:
    """The sentences of the bundled *two senses* corpus (``assets/corpora/two-senses.txt``), read once."""
    return tuple(sentence for document in read_documents(TWO_SENSES_FILE) for sentence in document)


def token_choices(services: Services, model_key: str | None, text: str | None) -> list[str]:
    """"position: piece" for every piece of ``text`` as the model reads it."""
    if not text or not text.strip():
        return []
    tokenizer = services.model(model_key).tokenizer
    if tokenizer is None:
        return []
    return [f"{i}: {piece}" for i, piece in enumerate(tokenizer.encode(text).tokens)]


def follow_token(choices: list[str], current: Any) -> str | None:
    """The choice to keep when the sentence changes: the same piece where the new sentence has it (its first
    occurrence: the word whose sense you are comparing), else the first piece after [CLS]."""
    piece = str(current).split(": ", 1)[-1] if current not in (None, "") else ""
    pieces = [choice.split(": ", 1)[1] for choice in choices]
    if piece in pieces:
        return choices[pieces.index(piece)]
    return choices[1] if len(choices) > 1 else None


def resolve_position(tokens: list[str], value: Any) -> int:
    """The token position ``value`` names: a number (7), the dropdown's label ("7: bank") or a piece ("bank",
    its first occurrence). ``gr.Error`` when it names none of ``tokens``."""
    text = str(value).strip() if value is not None else ""
    head, _, piece = (part.strip() for part in text.partition(":"))
    last = len(tokens) - 1 if tokens else None
    if head.lstrip("-").isdigit():
        position = int(head)
        if piece and not (0 <= position < len(tokens) and tokens[position] == piece) and piece in tokens:
            return tokens.index(piece)      # a label from before the sentence changed: follow its piece
        return whole_number(position, "The token position", 0, last)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return whole_number(value, "The token position", 0, last)
    if text in tokens:
        return tokens.index(text)
    raise gr.Error(f"Choose a token of the sentence (a position or one of its pieces: {', '.join(tokens[:12])}"
                   f"{', …' if len(tokens) > 12 else ''}); {text!r} is not one.", print_exception=False)


def build(services: Services, shelf: IndexShelf, model_key: str | None, source: str, text: str | None,
          layer: Any, sentences: Any, progress: Any = None, file: str | None = None) -> str:
    """Build and keep the index; a line saying what it holds."""
    limit = whole_number(sentences, "Sentences", 1, MAX_SENTENCES)
    chosen = corpus_sentences(source, text, limit, file)
    if not chosen:
        raise gr.Error("The corpus has no sentences to index.", print_exception=False)
    started = time.monotonic()
    with services.probing():
        loaded = services.model(model_key)

        def report(done: int, total: int) -> None:
            if progress is not None:
                progress(done / total, desc=f"{done:,} of {total:,} sentences")
        index = build_index(loaded, chosen, whole_number(layer, "Layer", 0, loaded.config.num_hidden_layers), report)
    shelf.put(index)
    return (f"Index ready: **{len(index.sentences):,} sentences**, {len(index):,} word pieces at **layer "
            f"{index.layer}** of `{index.source}` (built in {time.monotonic() - started:.1f} s).")


def in_context(text: str, start: int, end: int, around: int = CONTEXT_CHARS) -> str:
    """``text`` with [start, end) marked, cut to ``around`` characters each side (escaped HTML)."""
    left, right = max(0, start - around), min(len(text), end + around)
    before = ("…" if left else "") + html.escape(text[left:start])
    after = html.escape(text[end:right]) + ("…" if right < len(text) else "")
    return f"{before}<mark>{html.escape(text[start:end])}</mark>{after}"


def neighbours_html(result: NeighbourResult) -> str:
    """Each neighbour's sentence with the neighbour token marked, best first (escaped HTML)."""
    rows = []
    for n in result.neighbours:
        rows.append(f'<li><span class="nb-score">{sig(n.score)}</span> <code>{html.escape(n.token)}</code> · '
                    f'{in_context(n.text, n.start, n.end)}</li>')
    query = html.escape(result.token)
    return (f'<div class="corpus-neighbours"><p>Neighbours of <mark>{query}</mark> (token {result.position}) at layer '
            f'{result.layer}, by cosine similarity:</p><ol>{"".join(rows)}</ol></div>')


def search(services: Services, shelf: IndexShelf, model_key: str | None, text: str | None, position: Any,
           layer: Any, k: Any) -> str:
    """The neighbours of the token at ``position`` of ``text``, from the index of this model and layer."""
    require_text(text, empty_message="Type a sentence, then choose one of its tokens.")
    check_length(text or "")
    with services.probing():
        loaded = services.model(model_key)
        layer = whole_number(layer, "Layer", 0, loaded.config.num_hidden_layers)
        index = shelf.get(loaded.source, layer)
        if index is None:
            raise gr.Error(f"There is no index for this model at layer {layer} yet: build one first "
                           "(Build the index).", print_exception=False)
        tokens = loaded.tokenizer.encode(text or "").tokens if loaded.tokenizer is not None else []
        result = nearest(index, loaded, text or "", resolve_position(tokens, position), whole_number(k, "Neighbours", 1, 100))
    return neighbours_html(result)


def _widgets() -> dict[str, Any]:
    """The accordion's widgets (inside the current layout): the corpus and how much of it to index, then the
    sentence, its token and the neighbours found."""
    with gr.Accordion("Nearest contextual neighbours in a corpus", open=False):
        gr.Markdown(INTRO)
        with gr.Row():
            source = gr.Radio(SOURCES, value=TWO_SENSES, label="Corpus")
            layer = gr.Number(DEFAULT_LAYER, label=f"Layer ({LAYER_NOTE})", precision=0, minimum=0)
            sentences = gr.Number(DEFAULT_SENTENCES, label=f"Sentences (at most {MAX_SENTENCES:,})", precision=0,
                                  minimum=1, maximum=MAX_SENTENCES)
            build_button = gr.Button("Build the index")
        with gr.Row():
            corpus_text = gr.Textbox("", label="Your text (for 'My own text')", lines=3, scale=3,
                                     placeholder="Paste some paragraphs…")
            corpus_file = gr.File(label=f"Your file (for 'A file'; UTF-8, at most {MAX_FILE_MB} MB)",
                                  type="filepath", file_types=[".txt", ".md", ".jsonl"], scale=2)
        index_status = gr.Markdown()
        with gr.Row():
            query = gr.Textbox(label="Sentence", scale=3, placeholder="We sat on the grassy bank of the river.")
            position = gr.Dropdown([], value=EXAMPLE_WORD, label="Token", allow_custom_value=True, interactive=True)
            k = gr.Number(10, label="Neighbours", precision=0, minimum=1, maximum=100)
            search_button = gr.Button("Find neighbours", variant="primary")
        examples = gr.Examples(examples=[[q] for q in QUERY_EXAMPLES], inputs=[query], label="Examples",
                               cache_examples=False, api_name="neighbours_example", api_visibility="private")
        found = gr.HTML()
    return {"source": source, "layer": layer, "sentences": sentences, "corpus_text": corpus_text,
            "corpus_file": corpus_file, "build_button": build_button, "index_status": index_status, "query": query,
            "position": position, "k": k, "search_button": search_button, "examples": examples, "found": found}


def _handlers(services: Services, shelf: IndexShelf) -> tuple[Callable[..., str], Callable[..., str]]:
    """The index and search endpoints' handlers, on ``shelf``."""
    def neighbours_index(model_key: str = "default", corpus: str = "shakespeare", text: str = "",
                         layer: float = DEFAULT_LAYER,
                         sentences: float = DEFAULT_SENTENCES, file: str | None = None,
                         progress: gr.Progress = gr.Progress()) -> str:
        """Index a corpus's contextual vectors at one layer of a model (kept for /neighbours).

        Args:
            model_key: the model (picker key).
            corpus: "two-senses" (built in: 318 sentences with "bank" and other words in two senses),
                "shakespeare" (built in), "text" (the text given) or "file" (the file given).
            text: the corpus text when corpus is "text".
            layer: 0 (the embeddings' output) to the number of layers.
            sentences: how many sentences to index (1 to 5,000), from the start of the corpus.
            file: a .txt, .md or .jsonl file when corpus is "file" (UTF-8, at most 10 MB).
        Returns:
            a line saying what the index holds.
        """
        return build(services, shelf, model_key, corpus, text, layer, sentences, progress, file)

    def neighbours(model_key: str = "default", text: str = "", position: Any = 1, layer: float = DEFAULT_LAYER,
                   k: float = 10) -> str:
        """The corpus tokens whose contextual vectors are most like one token of a sentence.

        Args:
            model_key: the model the index was built with.
            text: the sentence.
            position: the token: its position among the sentence's pieces (0 = [CLS]), or the piece itself
                ("bank": its first occurrence).
            layer: the index's layer.
            k: how many neighbours (1 to 100).
        Returns:
            HTML: each neighbour's similarity, token and sentence, best first.
        """
        return search(services, shelf, model_key, text, position, layer, k)

    return neighbours_index, neighbours


def _refresh_handler(services: Services) -> Callable[..., Any]:
    """The token dropdown follows the sentence."""
    def refresh_tokens(model_key: str, text: str, current: Any) -> Any:
        try:
            choices = token_choices(services, model_key, text)
        except (ValueError, OSError):
            return gr.skip()
        return gr.update(choices=choices, value=follow_token(choices, current))

    return refresh_tokens


def build_ui(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """The section's widgets (inside the current layout, an accordion of the Embeddings tab) and events."""
    shelf = IndexShelf()
    w = _widgets()
    neighbours_index, neighbours = _handlers(services, shelf)
    query, position = w["query"], w["position"]
    query.change(_refresh_handler(services), inputs=[picker.dropdown, query, position], outputs=[position],
                 api_visibility="private", show_progress="hidden", trigger_mode="always_last")
    endpoint(w["build_button"].click, neighbours_index,
             [picker.dropdown, w["source"], w["corpus_text"], w["layer"], w["sentences"], w["corpus_file"]],
             [w["index_status"]], api_name="neighbours_index", duration=180,    # a few thousand sentences take a while
             heavy=True)
    wire_run(w["search_button"], query, w["examples"], neighbours,
             [picker.dropdown, query, position, w["layer"], w["k"]], [w["found"]], api_name="neighbours",
             show_progress="minimal")
    return {**{name: widget for name, widget in w.items() if name != "examples"}, "shelf": shelf}
