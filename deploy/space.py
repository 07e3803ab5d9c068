"""Create or update a Hugging Face Space with the app: ``python -m deploy --space owner/name [--dry-run]``.

Every run lists the files with their sizes (``deploy.files``) and stops with exit status 1, naming each
problem, on anything the Hub would refuse or that would keep the Space from starting; ``--dry-run`` stops
there (no token, no network). Otherwise, with the token from ``HF_TOKEN``:
``HfApi.create_repo(space, repo_type="space", space_sdk="gradio", exist_ok=True)`` (creates the Space or
leaves it as it is), then one ``upload_folder`` of exactly those files. ``delete_patterns=["*"]`` removes
what the Space holds beyond them (a file the app no longer has), so the Space mirrors the app.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from huggingface_hub import constants
from huggingface_hub.utils import HFValidationError, validate_repo_id

from deploy.files import (ALLOW_PATTERNS, IGNORE_PATTERNS, MAX_FILE_BYTES, ROOT, SpaceFile, problems, size_text,
                          space_files, warnings)

TOKEN_ENV = "HF_TOKEN"
COMMIT_MESSAGE = "Deploy BERT Explorer"


class HubClient(Protocol):
    """What the deploy uses of ``huggingface_hub.HfApi`` (tests pass a stand-in that records the calls)."""

    def create_repo(self, repo_id: str, **kwargs: Any) -> Any: ...

    def upload_folder(self, **kwargs: Any) -> Any: ...


def upload(api: HubClient, space_id: str, token: str, root: Path = ROOT, private: bool | None = None,
           message: str = COMMIT_MESSAGE) -> Any:
    """Create the Space if needed, then upload the app's files (``ALLOW_PATTERNS`` minus ``IGNORE_PATTERNS``)
    in place of what it holds; returns ``upload_folder``'s commit info."""
    api.create_repo(space_id, token=token, repo_type="space", space_sdk="gradio", exist_ok=True, private=private)
    # fresh lists: upload_folder extends the ignore list it is given in place
    return api.upload_folder(repo_id=space_id, repo_type="space", folder_path=str(root),
                             allow_patterns=list(ALLOW_PATTERNS), ignore_patterns=list(IGNORE_PATTERNS),
                             delete_patterns=["*"], commit_message=message, token=token)


def listing(space_id: str, files: Sequence[SpaceFile]) -> list[str]:
    """One line per file (size, path), after a header with the count and the total."""
    lines = [f"Space {space_id}: {len(files)} files, {size_text(sum(f.size for f in files))}"]
    lines += [f"{size_text(f.size):>10}  {f.path}" for f in files]
    return lines


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m deploy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", required=True, help="the Space's id, owner/name (created when it does not exist)")
    parser.add_argument("--dry-run", action="store_true", help="list the files and check them; upload nothing")
    parser.add_argument("--private", action="store_true", help="create the Space private (an existing one keeps "
                                                               "its visibility)")
    parser.add_argument("--message", default=COMMIT_MESSAGE, help="the commit message")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, api: HubClient | None = None, root: Path = ROOT,
         environ: Mapping[str, str] | None = None, max_file_bytes: int = MAX_FILE_BYTES,
         say: Callable[[str], None] = print) -> int:
    """The command line; returns the exit status: 0 done (or a clean dry run), 1 refused (a file the Hub
    would not take, a Space that would not start), 2 cannot try (bad id, no token, offline mode)."""
    args = _arguments(argv)
    env = os.environ if environ is None else environ
    try:
        validate_repo_id(args.space)
        if args.space.count("/") != 1:
            raise HFValidationError("a Space id is owner/name")
    except HFValidationError as exc:
        say(f"error: {args.space!r} is not a Space id of the form owner/name ({exc})")
        return 2
    files = space_files(root)
    for line in listing(args.space, files):
        say(line)
    for line in warnings(files):
        say(f"warning: {line}")
    found = problems(files, root, max_file_bytes)
    if found:
        say(f"refused: {len(found)} problem(s), nothing uploaded:")
        for line in found:
            say(f"  - {line}")
        return 1
    say("Files over 10 MB go through LFS / Xet (upload_folder does it).")
    if args.dry_run:
        say("Dry run: nothing uploaded.")
        return 0
    token = env.get(TOKEN_ENV, "").strip()
    if not token:
        say(f"error: set {TOKEN_ENV} to a Hugging Face token with write access (https://huggingface.co/settings/tokens)")
        return 2
    if api is None:
        if constants.HF_HUB_OFFLINE:
            say("error: the Hugging Face hub is switched off here (HF_HUB_OFFLINE): unset it to deploy")
            return 2
        from huggingface_hub import HfApi

        api = HfApi()
    commit = upload(api, args.space, token, root, private=args.private or None, message=args.message)
    say(f"Uploaded to https://huggingface.co/spaces/{args.space} ({getattr(commit, 'commit_url', commit)})")
    return 0
