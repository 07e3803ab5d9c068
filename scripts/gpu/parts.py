"""The trained model on its way home: exported in fp16 in the Hugging Face layout, put in one tar, cut into parts
no larger than the device's 16 MiB a file, with a manifest of SHA-256 sums; and here, the parts checked and
joined again into the model folder.

``manifest.json``: ``{"format", "archive": {"bytes", "sha256"}, "parts": [{"name", "bytes", "sha256"}],
"files": [{"name", "bytes", "sha256"}], "heads"}``. Joining trusts nothing in the parts: a manifest may list only
the files an fp16 HF export has (``EXPORT_FILES``: config.json, safetensors weights and their shard index, the
tokenizer files, the model card), so a rewritten, re-hashed manifest carrying a pickle (``.bin``, ``.pt``,
``.pkl``) or any other file is refused before a part is read; every part is a regular file whose size and hash
match, the joined archive's hash matches, and the tar may hold only the listed plain files (no links, no folders,
no ``..``), each with its size and hash.
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from engine.checkpoints.hf_format import save
from engine.checkpoints.hub import HUB_FILES
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer
from scripts.export_default_model import compute_in_fp32, to_half
from scripts.gpu.pack import read_checked

FORMAT = 1
MANIFEST = "manifest.json"
PART_PREFIX = "model.tar.part-"
PART_BYTES = 16 * 2**20 - 4096     # under the device's 16 MiB per file
MAX_PARTS = 4                      # 8 files come back: these, the manifest, the summary, the log and the metrics
MAX_MODEL_BYTES = MAX_PARTS * PART_BYTES
EXPORT_FILES = (*HUB_FILES, "README.md")   # what the loader reads (no pickled weights), and the model card
ROOT_MODEL = Path(__file__).resolve().parents[2] / "assets" / "default-model"   # what the session trains


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def export_fp16(model: BertWithHeads, tokenizer: WordPieceTokenizer, folder: Path) -> list[Path]:
    """``folder`` as the bundled model is shipped (``scripts/export_default_model.py``): HF layout, every head,
    fp16 safetensors, config.json asking transformers to compute in fp32. Returns its files."""
    save(model, tokenizer, folder)
    to_half(folder / "model.safetensors")
    compute_in_fp32(folder / "config.json")
    return sorted(p for p in folder.iterdir() if p.is_file())


def write_parts(folder: Path, out: Path, heads: tuple[str, ...], part_bytes: int = PART_BYTES) -> dict[str, Any]:
    """Tar the files of ``folder`` (names only, sorted), cut the tar into ``out/model.tar.part-NN`` of at most
    ``part_bytes`` and write ``out/manifest.json``; returns the manifest."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in files:
            info = archive.gettarinfo(str(path), arcname=path.name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with path.open("rb") as handle:
                archive.addfile(info, handle)
    blob = buffer.getvalue()
    count = -(-len(blob) // part_bytes)
    if count > MAX_PARTS:
        raise ValueError(f"the model's archive is {len(blob):,} bytes: more than {MAX_PARTS} parts of {part_bytes:,}")
    parts = []
    for index in range(count):
        piece = blob[index * part_bytes:(index + 1) * part_bytes]
        name = f"{PART_PREFIX}{index:02d}"
        (out / name).write_bytes(piece)
        parts.append({"name": name, "bytes": len(piece), "sha256": sha256(piece)})
    manifest = {"format": FORMAT, "archive": {"bytes": len(blob), "sha256": sha256(blob)}, "parts": parts,
                "files": [{"name": p.name, "bytes": p.stat().st_size, "sha256": sha256(p.read_bytes())} for p in files],
                "heads": list(heads)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def export_parts(model: BertWithHeads, tokenizer: WordPieceTokenizer, out: Path,
                 part_bytes: int = PART_BYTES) -> dict[str, Any]:
    """The fp16 export of ``model`` written as parts and a manifest into ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        export_fp16(model, tokenizer, folder)
        return write_parts(folder, out, tuple(model.heads), part_bytes)


# ---------------------------------------------------------------------------------------------- here: joining
def read_manifest(folder: Path) -> dict[str, Any]:
    """``manifest.json`` checked for shape (a ValueError says what is wrong)."""
    try:
        manifest = json.loads(read_checked(folder / MANIFEST, 1 * 2**20))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{MANIFEST} is not JSON ({exc})") from None
    ok = (isinstance(manifest, dict) and manifest.get("format") == FORMAT
          and isinstance(manifest.get("parts"), list) and isinstance(manifest.get("files"), list)
          and isinstance(manifest.get("archive"), dict) and 0 < len(manifest["parts"]) <= MAX_PARTS)
    if not ok:
        raise ValueError(f"{MANIFEST} is not a format-{FORMAT} manifest with 1 to {MAX_PARTS} parts")
    for entry in manifest["parts"] + manifest["files"]:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
            raise ValueError(f"{MANIFEST} names a file it must not: {name!r}")
    check_export_files([entry["name"] for entry in manifest["files"]])
    return manifest


def check_export_files(names: list[str]) -> None:
    """ValueError unless ``names`` are only files of an fp16 HF export (``EXPORT_FILES``): a pickle
    (``pytorch_model.bin``, ``.pt``, ``.pkl``) or anything else the loader would not read is refused by name."""
    others = sorted(n for n in names if not any(fnmatchcase(n, pattern) for pattern in EXPORT_FILES))
    if others:
        shown = ", ".join(repr(n[:60]) for n in others[:5]) + (" …" if len(others) > 5 else "")
        raise ValueError(f"the archive would hold {shown}, which the model loader does not read (pickled weights "
                         "or another file): a model comes back only as config.json, safetensors weights (with "
                         "their shard index), the tokenizer files and README.md")


def joined_archive(folder: Path, manifest: dict[str, Any]) -> bytes:
    """The parts, each checked, joined; the archive's own size and hash checked."""
    pieces = []
    for entry in manifest["parts"]:
        piece = read_checked(folder / entry["name"], PART_BYTES * 2)
        if len(piece) != entry.get("bytes") or sha256(piece) != entry.get("sha256"):
            raise ValueError(f"{entry['name']} differs from the manifest (size or SHA-256): fetch it again")
        pieces.append(piece)
    blob = b"".join(pieces)
    if len(blob) != manifest["archive"].get("bytes") or sha256(blob) != manifest["archive"].get("sha256"):
        raise ValueError("the joined parts differ from the manifest's archive: a part is missing or out of order")
    return blob


def join_parts(folder: str | Path, target: str | Path) -> dict[str, Any]:
    """Check the parts and manifest in ``folder`` and write the model folder ``target`` (replaced if present)."""
    folder, target = Path(folder), Path(target)
    manifest = read_manifest(folder)
    blob = joined_archive(folder, manifest)
    expected = {entry["name"]: entry for entry in manifest["files"]}
    staging = Path(tempfile.mkdtemp(prefix=".joining-", dir=target.parent if target.parent.exists() else None))
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as archive:
            members = archive.getmembers()
            if sorted(m.name for m in members) != sorted(expected):
                raise ValueError("the archive holds other files than the manifest lists")
            for member in members:
                if not member.isreg():
                    raise ValueError(f"{member.name} in the archive is not a plain file")
                data = archive.extractfile(member).read()
                entry = expected[member.name]
                if len(data) != entry.get("bytes") or sha256(data) != entry.get("sha256"):
                    raise ValueError(f"{member.name} differs from the manifest (size or SHA-256)")
                (staging / member.name).write_bytes(data)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest
