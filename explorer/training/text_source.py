"""The Training tab's text and vocabulary: a built-in or server corpus, pasted text or an uploaded file, checked here
(format, size, enough documents for next-sentence prediction) before a run starts.

The text a person gives goes to the engine as ``JobSpec.corpus_text``; the run keeps its own copy
(``<run>/corpus.txt`` / ``corpus.jsonl``), so continuing it later never needs the upload again.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from engine.checkpoints.hf_format import ASSETS
from engine.text.documents import parse_documents, read_text, text_format
from engine.training.tasks.job_documents import check_text
from explorer.server_corpora import PREFIX, server_corpora, server_corpus_path

SOURCES = [("Built-in corpus", "builtin"), ("Paste text", "text"), ("Upload a file", "file")]
CORPORA = ["shakespeare"]
VOCABULARIES = [("Train a WordPiece vocabulary on the text", "train"),
                ("Keep the bundled model's vocabulary (bert-base-uncased, 30,522 pieces)", "keep")]
BUNDLED_TOKENIZER = ASSETS / "tokenizer"
MAX_TEXT_MB = 20
MAX_TEXT_BYTES = MAX_TEXT_MB * 1024 * 1024
UPLOAD_TYPES = (".txt", ".jsonl")

FORMAT_HELP = f"""\
**Your own text.** A *document* is a stretch of text whose sentences follow each other
(next-sentence prediction pairs two sentences of one document, or one with a sentence of another).
**Pasted text and `.txt` files:** documents are separated by a blank line. **`.jsonl` files:** one
JSON object per line whose `"text"` field holds one document, e.g. `{{"text": "First sentence. Second."}}`
(other fields are ignored; a line that is just a JSON string works too). UTF-8, at most
**{MAX_TEXT_MB} MB**. With next-sentence prediction the text needs two documents or more, one of them
with two sentences or more. The run keeps a copy of the text, so it can be continued later.
"""


def corpus_choices() -> list[str]:
    """The built-in corpora and the corpora on the server (``server:<name>``; ``server_corpora``)."""
    return CORPORA + list(server_corpora())


def refreshed_corpora(current: str | None) -> Any:
    """The corpus list read again when the dropdown is opened: a corpus put on the server after the app
    started is offered without a restart (and one removed is no longer offered)."""
    choices = corpus_choices()
    return gr.Dropdown(choices=choices, value=current if current in choices else "shakespeare")


def text_fields(source: str, corpus: str, text: str | None, text_file: Any) -> dict[str, Any]:
    """The ``JobSpec`` fields of the chosen text: ``corpus`` for a built-in or server corpus (its path stays
    on the server), else ``corpus_text``, ``corpus_format`` and ``corpus_label``. ValueError says what is wrong
    and what to do."""
    if source == "builtin":
        if isinstance(corpus, str) and corpus.startswith(PREFIX):
            return {"corpus": str(server_corpus_path(corpus)), "corpus_label": corpus}
        if corpus not in CORPORA:
            raise ValueError(f"unknown corpus {corpus!r}; choose one of: {', '.join(corpus_choices())}")
        return {"corpus": corpus}
    if source == "text":
        if not isinstance(text, str) or not text.strip():
            raise ValueError("Paste some text into the box first (documents separated by blank lines), "
                             "or choose another source.")
        size = len(text.encode("utf-8", errors="replace"))
        if size > MAX_TEXT_BYTES:
            raise ValueError(f"The pasted text is {size / 2**20:.1f} MB; the limit is {MAX_TEXT_MB} MB. "
                             "Paste less text.")
        return {"corpus_text": text, "corpus_format": "txt", "corpus_label": "pasted text"}
    if source == "file":
        path = _upload_path(text_file)
        if path is None:
            raise ValueError("Upload a .txt or .jsonl file first, or choose another source.")
        name = path.name
        if path.suffix.lower() not in UPLOAD_TYPES:
            kind = f"a {path.suffix} file" if path.suffix else "a file without an extension"
            raise ValueError(f"{name}: {kind} cannot be read; upload a .txt (documents separated by blank lines) "
                             "or a .jsonl (one {\"text\": ...} per line).")
        decoded, name = read_text(path, name, max_bytes=MAX_TEXT_BYTES)
        return {"corpus_text": decoded, "corpus_format": text_format(name), "corpus_label": name}
    raise ValueError(f"unknown text source {source!r}; choose one of: {', '.join(v for _, v in SOURCES)}")


def check_given_text(fields: dict[str, Any], max_documents: int, nsp: bool) -> None:
    """For given text: parse it as the run will (its first ``max_documents`` documents) and refuse text
    that cannot make next-sentence pairs (``check_text``); ValueError names the problem."""
    if "corpus_text" not in fields:
        return
    documents = parse_documents(fields["corpus_text"], fields["corpus_format"], fields["corpus_label"])
    check_text(documents[:max_documents], nsp)


def vocabulary_fields(vocabulary: str, vocab_size: int) -> dict[str, Any]:
    """``vocab_size`` for a vocabulary trained on the text, or ``tokenizer``: the bundled one."""
    if vocabulary == "train":
        return {"vocab_size": vocab_size}
    if vocabulary == "keep":
        return {"tokenizer": str(BUNDLED_TOKENIZER)}
    raise ValueError(f"unknown vocabulary {vocabulary!r}; choose train (a WordPiece vocabulary learnt on the "
                     "text) or keep (the bundled bert-base-uncased vocabulary)")


def _upload_path(value: Any) -> Path | None:
    """The uploaded file's path, from what Gradio hands over (a path string, or a FileData-like dict)."""
    if isinstance(value, dict):
        value = value.get("path")
    if value is None or value == "":
        return None
    return Path(str(value))


def build_text_source() -> dict[str, gr.components.Component]:
    """The source choice and its inputs (only the chosen one visible), and the vocabulary choice."""
    with gr.Group():
        source = gr.Radio(SOURCES, value="builtin", label="Text to train on")
        corpus = gr.Dropdown(corpus_choices(), value="shakespeare", label="Corpus (built in, or on the server)",
                             info="Server corpora (server:…) are the files and folders in EXPLORER_CORPUS_DIRS, "
                                  "of any size: tokenised once, then read from the cache.")
        text = gr.Textbox("", label="Your text (documents separated by a blank line)", lines=8, max_lines=20,
                          visible=False, placeholder="First document. Its second sentence.\n\n"
                                                     "Second document. And so on.")
        text_file = gr.File(label=f"A .txt or .jsonl file (UTF-8, at most {MAX_TEXT_MB} MB)", type="filepath",
                            visible=False)
        help_note = gr.Markdown(FORMAT_HELP, visible=False)
        vocabulary = gr.Radio(VOCABULARIES, value="train", label="Vocabulary")

    def show(choice: str) -> tuple[Any, ...]:
        return (gr.Dropdown(visible=choice == "builtin"), gr.Textbox(visible=choice == "text"),
                gr.File(visible=choice == "file"), gr.Markdown(visible=choice != "builtin"))

    source.change(show, inputs=source, outputs=[corpus, text, text_file, help_note], queue=False,
                  api_visibility="private", show_progress="hidden")
    corpus.focus(refreshed_corpora, inputs=corpus, outputs=corpus, queue=False, api_visibility="private",
                 show_progress="hidden")
    return {"source": source, "corpus": corpus, "text": text, "text_file": text_file, "vocabulary": vocabulary}
