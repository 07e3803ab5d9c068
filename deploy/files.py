"""Which files a Space gets, how big each is, and what the Hub would refuse.

The Space runs ``app.py`` from a copy of the app's files: ``app.py``, ``engine/``, ``explorer/``,
``assets/`` (the default model's 46.8 MB weights and the README's screenshots included),
``requirements.txt`` (what the Space installs), ``LICENSE`` and ``README.md`` (its YAML front matter configures the
Space: ``sdk: gradio``, ``sdk_version``, ``app_file``). Nothing else: no runs, caches, tests, benches,
models folder or ``.git``. The selection is ``upload_folder``'s own: the same patterns through
``huggingface_hub.utils.filter_repo_objects``, with the ignore patterns it always adds, so the dry run lists
exactly what the upload sends.

The Hub's per-file limit is 50 GB (https://huggingface.co/docs/hub/storage-limits, "Repository limitations
and recommendations": files under 20 GB are recommended, 50 GB is the maximum). Large files are fine
otherwise: ``upload_folder`` sends them through LFS / Xet by itself (the weights go that way).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import metadata_load
from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

ROOT = Path(__file__).resolve().parent.parent
ALLOW_PATTERNS = ("app.py", "requirements.txt", "README.md", "LICENSE", "engine/*", "explorer/*", "assets/*")
IGNORE_PATTERNS = ("*/__pycache__/*", "*.pyc", "*.pyo", "*/.ipynb_checkpoints/*", "*.DS_Store", "*~", "*.swp")
MAX_FILE_BYTES = 50 * 1000**3          # the Hub's maximum per file (see above)
RECOMMENDED_FILE_BYTES = 20 * 1000**3  # above this the Hub recommends splitting a file
REQUIRED = ("app.py", "requirements.txt", "README.md")


@dataclass(frozen=True)
class SpaceFile:
    """One file of the upload: its path in the Space (``/``-separated) and its size in bytes."""

    path: str
    size: int


def space_files(root: Path = ROOT, allow: Sequence[str] = ALLOW_PATTERNS,
                ignore: Sequence[str] = IGNORE_PATTERNS) -> list[SpaceFile]:
    """The files ``upload_folder(root, allow_patterns=allow, ignore_patterns=ignore)`` would send, sorted."""
    root = Path(root).resolve()
    found = []
    for top in sorted(_tops(allow)):          # only where a pattern can match: runs/, .git, ... are never read
        start = root / top
        candidates = [start] if start.is_file() else sorted(start.glob("**/*")) if start.is_dir() else []
        found += [p.relative_to(root).as_posix() for p in candidates if p.is_file()]
    kept = filter_repo_objects(found, allow_patterns=list(allow),
                               ignore_patterns=[*ignore, *DEFAULT_IGNORE_PATTERNS])
    return [SpaceFile(path, (root / path).stat().st_size) for path in kept]


def _tops(allow: Sequence[str]) -> set[str]:
    """The first path part of each pattern (none of them starts with a wildcard)."""
    return {pattern.split("/", 1)[0] for pattern in allow}


def problems(files: Sequence[SpaceFile], root: Path = ROOT, max_file_bytes: int = MAX_FILE_BYTES) -> list[str]:
    """What would make the Hub refuse the upload, or the Space fail to start: one sentence each (empty: none)."""
    found = [f"{f.path} is {size_text(f.size)}; the Hub takes at most {size_text(max_file_bytes)} per file "
             "(split it, or keep it out of the Space)" for f in files if f.size > max_file_bytes]
    paths = {f.path for f in files}
    found += [f"{name} is missing: a Space needs it" for name in REQUIRED if name not in paths]
    if "README.md" in paths:
        found += _front_matter_problems(Path(root), paths)
    return found


def warnings(files: Sequence[SpaceFile]) -> list[str]:
    """What the Hub takes but advises against (files over its recommended 20 GB)."""
    return [f"{f.path} is {size_text(f.size)}, above the {size_text(RECOMMENDED_FILE_BYTES)} the Hub recommends"
            for f in files if f.size > RECOMMENDED_FILE_BYTES]


def _front_matter_problems(root: Path, paths: set[str]) -> list[str]:
    """README.md's YAML front matter (read by huggingface_hub's own ``metadata_load``) must make a Gradio
    Space that runs an uploaded file on the pinned Gradio."""
    try:
        meta = metadata_load(root / "README.md")
    except Exception as exc:  # noqa: BLE001 - PyYAML's errors, whose classes this module does not import
        return [f"README.md's front matter is not valid YAML: {exc}"]
    if meta is None:
        return ["README.md has no YAML front matter (--- ... ---): the Space would not know it is a Gradio app"]
    found = []
    if meta.get("sdk") != "gradio":
        found.append(f"README.md's front matter says sdk: {meta.get('sdk')!r}; this app needs sdk: gradio")
    app_file = str(meta.get("app_file", "app.py"))
    if app_file not in paths:
        found.append(f"README.md's front matter runs app_file: {app_file}, which is not uploaded")
    pin = _gradio_pin(root / "requirements.txt")
    if pin is not None and str(meta.get("sdk_version")) != pin:
        found.append(f"README.md's front matter asks for Gradio {meta.get('sdk_version')} but requirements.txt "
                     f"pins {pin}: make them equal")
    return found


def _gradio_pin(requirements: Path) -> str | None:
    if not requirements.is_file():
        return None
    match = re.search(r"^gradio==([^\s#]+)", requirements.read_text(encoding="utf-8"), re.MULTILINE)
    return match.group(1) if match else None


def size_text(size: int) -> str:
    """Bytes for a person: ``46.8 MB``, ``512 B``, ``50 GB`` (powers of 1000, as the Hub writes sizes)."""
    for unit, scale in (("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}" if size < 100 * scale else f"{size / scale:,.0f} {unit}"
    return f"{size} B"
