"""Fetching a BERT from the Hugging Face hub: validated ids, only the files we need, fast failure offline."""
from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Callable

# "owner/name" only; no paths, no URLs. The hub still redirects legacy single names
# (bert-base-uncased), but a bare word is more often a mistyped folder than a model.
_HUB_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?/[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$")
# The only files a BERT checkpoint needs; nothing executable, no remote code.
HUB_FILES = ["config.json", "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors",
             "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
LEGACY_WEIGHTS = ["pytorch_model.bin"]
DEFAULT_MAX_BYTES = 1_500_000_000   # room for bert-large in fp32


class HubUnavailableError(ConnectionError):
    """The hub cannot be reached (offline mode or no network) and the model is not cached."""


class DownloadTooLargeError(ValueError):
    """The model's files are larger than the download cap allows; nothing was downloaded."""


def is_hub_id(text: str) -> bool:
    """True for a syntactically valid hub model id (``owner/name``); rejects paths and URLs."""
    return bool(_HUB_ID.fullmatch(text)) and ".." not in text and not text.endswith((".", "-"))


def hub_offline() -> bool:
    """Whether the user switched the hub off (``HF_HUB_OFFLINE=1`` or ``TRANSFORMERS_OFFLINE=1``)."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def files_to_fetch(names: list[str]) -> list[str]:
    """The repository files ``download`` would fetch: the allow-list, and ``.bin`` weights only
    when there are no safetensors."""
    wanted = HUB_FILES if any(n.endswith(".safetensors") for n in names) else HUB_FILES + LEGACY_WEIGHTS
    return [n for n in names if "/" not in n and any(fnmatch.fnmatchcase(n, pattern) for pattern in wanted)]


def check_download_size(repo_id: str, files: list[tuple[str, int | None]], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Raise ``DownloadTooLargeError`` before anything is fetched when the files to download exceed
    ``max_bytes`` (a cap, so that nobody can make a public app fetch a multi-GB repository)."""
    sizes = dict(files)
    total = sum(sizes[name] or 0 for name in files_to_fetch(list(sizes)))
    if total > max_bytes:
        raise DownloadTooLargeError(
            f"{repo_id!r} would download {total / 1e6:,.0f} MB of weights; at most {max_bytes / 1e6:,.0f} MB "
            "may be fetched here. Pick a smaller BERT, or raise the limit.")


def download(repo_id: str, revision: str | None = None, timeout: float = 10.0,
             max_bytes: int = DEFAULT_MAX_BYTES, check_config: Callable[[Path], None] | None = None) -> Path:
    """Download (or find in the cache) a model's config, weights and tokenizer files.

    Prefers safetensors; falls back to ``pytorch_model.bin`` only when the repo has no
    safetensors (it is then read with ``weights_only=True``). Raises ``ValueError`` for a
    malformed id, ``HubUnavailableError`` offline, ``FileNotFoundError`` for a missing repo,
    ``DownloadTooLargeError`` when the files to fetch exceed ``max_bytes``. ``check_config(path)`` sees
    ``config.json`` alone, fetched first, and may refuse the model (e.g. too many parameters) before any
    weights are downloaded.
    """
    if not is_hub_id(repo_id):
        raise ValueError(f"{repo_id!r} is not a hub model id; expected the form 'owner/name'")
    import httpx2  # huggingface_hub's HTTP client
    import huggingface_hub
    from huggingface_hub import errors

    not_found = (errors.RepositoryNotFoundError, errors.RevisionNotFoundError, errors.GatedRepoError)
    offline = hub_offline()
    unreachable: Exception | None = None
    try:
        if not offline:
            # A bounded look-up first: snapshot_download's own has no timeout and waits forever on a
            # stalled connection. If the hub does not answer, fall back to the local cache.
            try:
                info = huggingface_hub.HfApi().repo_info(repo_id, revision=revision, timeout=timeout,
                                                         files_metadata=True)
                check_download_size(repo_id, [(s.rfilename, s.size) for s in (info.siblings or [])], max_bytes)
            except not_found:
                raise
            except (httpx2.TransportError, errors.HfHubHTTPError, errors.OfflineModeIsEnabled) as exc:
                unreachable = exc
        local_only = offline or unreachable is not None
        if check_config is not None:
            check_config(Path(huggingface_hub.hf_hub_download(repo_id, "config.json", revision=revision,
                                                              etag_timeout=timeout, local_files_only=local_only)))
        path = Path(huggingface_hub.snapshot_download(
            repo_id, revision=revision, allow_patterns=HUB_FILES, etag_timeout=timeout,
            local_files_only=local_only))
        if not any(path.glob("*.safetensors")):
            path = Path(huggingface_hub.snapshot_download(
                repo_id, revision=revision, allow_patterns=HUB_FILES + LEGACY_WEIGHTS,
                etag_timeout=timeout, local_files_only=local_only))
    except not_found as exc:
        raise FileNotFoundError(f"hub model {repo_id!r} was not found or is not public: {type(exc).__name__}") from None
    except errors.LocalEntryNotFoundError:
        if offline:
            raise HubUnavailableError(
                f"the Hugging Face hub is switched off here (HF_HUB_OFFLINE=1) and {repo_id!r} is not in the "
                "local cache; set HF_HUB_OFFLINE=0 where the hub is reachable, or load a local directory"
            ) from None
        reason = f" ({type(unreachable).__name__}: {str(unreachable)[:200]})" if unreachable is not None else ""
        raise HubUnavailableError(f"could not reach the Hugging Face hub to fetch {repo_id!r} (no network?)"
                                  f"{reason}") from None
    except (OSError, errors.HfHubHTTPError, httpx2.TransportError) as exc:
        raise HubUnavailableError(f"could not fetch {repo_id!r} from the Hugging Face hub: {exc}") from None
    return path
