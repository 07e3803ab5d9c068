"""BERT Explorer: ``python app.py`` builds the Gradio app and serves it.

Offline by default: analytics off and the Hugging Face hub in offline mode unless the
environment says otherwise. Host and port come from GRADIO_SERVER_NAME /
GRADIO_SERVER_PORT (Gradio reads them; default 127.0.0.1:7860; 0.0.0.0 on a Space).
Every setting is an environment variable; README "Configuration" lists them (and ``--help`` briefly).
``--help`` and ``--version`` print and exit; any other argument exits 2 with the reason.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import sys
import tempfile
import threading
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Must happen before gradio (or huggingface_hub) is imported anywhere.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")   # no analytics even when the hub is switched on

PACKAGE = "bert-explorer"
SETTINGS_HELP = """\
Every setting is an environment variable (README "Configuration" says more):
  EXPLORER_DEFAULT_MODEL      the model served as "default": a folder or a hub id (default assets/default-model)
  EXPLORER_RUNS_DIR           where training runs and checkpoints are written (default runs)
  EXPLORER_MODEL_DIRS         folders local models may be loaded from, ':'-separated (default models)
  EXPLORER_CORPUS_DIRS        folders whose files the Training tab offers as corpora (default corpora)
  BERT_ENGINE_CACHE           the token cache (default ~/.cache/bert-explorer)
  EXPLORER_PUBLIC=1           public mode: training only with EXPLORER_ADMIN_TOKEN, off without it
  EXPLORER_DEVICE             where the probing tabs run: auto, cpu, cuda or cuda:N (default auto)
  EXPLORER_DEMO=1             run every tab's examples once at start
  EXPLORER_CONCURRENCY, EXPLORER_QUEUE_SIZE, EXPLORER_HEAVY_CONCURRENCY, EXPLORER_HEAVY_QUEUE,
  EXPLORER_HEAVY_PER_CLIENT   how many requests run and wait
  EXPLORER_MAX_UPLOAD_MB, EXPLORER_MAX_HUB_MB, EXPLORER_MAX_MODEL_PARAMS   size caps
  EXPLORER_FORWARD_CACHE_MB   memory for the kept model forwards a layer or head change redraws from (default 512)
  EXPLORER_MAX_SESSIONS       visitors' sessions kept in memory, ~1 MB each (default 1000; public mode 200)
  GRADIO_SERVER_NAME, GRADIO_SERVER_PORT   host and port (default 127.0.0.1 and 7860; --host, --port win)
  HF_HUB_OFFLINE=0            let the app download hub models (default 1: offline)
"""


def package_version() -> str:
    """The installed package's version, else the version in the ``pyproject.toml`` beside this file."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        with open(Path(__file__).with_name("pyproject.toml"), "rb") as file:
            return str(tomllib.load(file)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def argument_parser() -> argparse.ArgumentParser:
    """The command line: ``--help``, ``--version``, ``--port`` and ``--host``; the other settings are environment
    variables."""
    parser = argparse.ArgumentParser(
        description="BERT Explorer: serve the app (see, train and take apart a BERT in the browser) until "
                    "interrupted.", epilog=SETTINGS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--port", type=_port, help="the port to serve on (default: GRADIO_SERVER_PORT, else 7860)")
    parser.add_argument("--host", help="the address to serve on, e.g. 0.0.0.0 for every interface "
                                       "(default: GRADIO_SERVER_NAME, else 127.0.0.1)")
    return parser


def _port(text: str) -> int:
    """A TCP port number, 1-65535 (argparse turns the ValueError into 'invalid _port value')."""
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port number (1-65535)")
    return value


# --help, --version and a wrong argument are answered before gradio and torch are imported (that import takes
# 5-20 s on 2 busy cores), when this file runs as the program: `python app.py` or the `bert-explorer` script.
if __name__ == "__main__" or Path((getattr(sys, "argv", None) or [""])[0]).stem == PACKAGE:
    argument_parser().parse_args()

import gradio as gr  # noqa: E402
from gradio import utils as gr_utils  # noqa: E402

from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR  # noqa: E402
from engine.data.token_cache import cache_root  # noqa: E402
from engine.folder_listing import configured_folder  # noqa: E402
from explorer.serving import heavy_limits as heavy_limits  # noqa: E402
from explorer.serving import warmup as warmup  # noqa: E402
from explorer.page import CSS, THEME, build_app  # noqa: E402
from explorer.serving.access import ADMIN_TOKEN_ENV, PUBLIC_ENV, env_flag, env_int  # noqa: E402
from explorer.serving.sessions import session_capacity  # noqa: E402
from explorer.services import Services, default_services, runs_dir_from_env  # noqa: E402

CONCURRENCY_ENV = "EXPLORER_CONCURRENCY"    # concurrent requests per event
QUEUE_SIZE_ENV = "EXPLORER_QUEUE_SIZE"      # requests waiting in the queue before "queue is full"
MAX_UPLOAD_ENV = "EXPLORER_MAX_UPLOAD_MB"   # largest file Gradio accepts in an upload
DEFAULT_CONCURRENCY = 2                     # tokenization is cheap; model work is CPU/GPU bound
DEFAULT_QUEUE_SIZE = {False: 64, True: 16}  # private / public mode
DEFAULT_MAX_UPLOAD_MB = 50                  # engine.text.documents refuses larger corpus files too


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    return env_int(env, name, default, minimum=1)


def queue_settings(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(concurrency per event, queue max size) from the environment; public mode queues less."""
    env = os.environ if environ is None else environ
    public = env_flag("EXPLORER_PUBLIC", env)
    return (_positive_int(env, CONCURRENCY_ENV, DEFAULT_CONCURRENCY),
            _positive_int(env, QUEUE_SIZE_ENV, DEFAULT_QUEUE_SIZE[public]))


CONCURRENCY, QUEUE_MAX_SIZE = queue_settings()


def blocked_paths(runs_dir: Path) -> list[str]:
    """What Gradio must never serve: the runs folder (corpora, uploads, run specs, metrics, raw checkpoints).
    Nothing is allowed beyond Gradio's own cache: a checkpoint's download is a zip written to the temp folder
    and copied into that cache when the Training tab offers it (docs/design/security.md). A runs folder that
    holds the temp folder or Gradio's cache is not blocked (that would block every upload and download);
    nothing serves it then either."""
    runs = configured_folder(runs_dir)                 # a symlink loop: blocked as given, never raising
    needed = [Path(tempfile.gettempdir()), Path(gr_utils.get_upload_folder()), Path(gr_utils.get_cache_folder())]
    if any(runs == d or runs in d.parents for d in (configured_folder(p) for p in needed)):
        return []
    return [str(runs)]


def launch_options(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``launch()``: no share link, the sessions Gradio keeps (``EXPLORER_MAX_SESSIONS``),
    upload cap, no allowed paths, the runs folder blocked, and 0.0.0.0 on a Hugging Face Space (``SPACE_ID`` set) unless GRADIO_SERVER_NAME says otherwise."""
    env = os.environ if environ is None else environ
    options: dict[str, Any] = {
        "theme": THEME, "css": CSS, "share": False, "state_session_capacity": session_capacity(env),
        "max_file_size": _positive_int(env, MAX_UPLOAD_ENV, DEFAULT_MAX_UPLOAD_MB) * 1024 * 1024,
        "allowed_paths": [], "blocked_paths": blocked_paths(Path(env.get("EXPLORER_RUNS_DIR") or "runs")),
    }
    if env.get("SPACE_ID") and not env.get("GRADIO_SERVER_NAME"):
        options["server_name"] = "0.0.0.0"
    return options


def create_app(services: Services | None = None, environ: Mapping[str, str] | None = None) -> gr.Blocks:
    """Build the app with its queue configured (no launch); default services when none given.
    Heavy requests wait at the app's heavy gate, not in Gradio's queue (``explorer/serving/heavy_limits.py``: its limits
    from ``environ``). On a ZeroGPU Space the model-running handlers are ``spaces.GPU`` functions from their
    definition (``explorer.serving.gpu.on_gpu``)."""
    demo = build_app(services)
    concurrency, max_size = queue_settings(environ)
    # api_open=False: a queued event is served through the queue only (Gradio opens /run/<name> to skip it,
    # with its limits, everywhere but on a Space); events declared queue=False still answer there.
    demo.queue(default_concurrency_limit=concurrency, max_size=max_size, api_open=False)
    heavy_limits.install(demo, heavy_limits.HeavyLimits.from_env(environ))
    return demo


def after_start(services: Services) -> None:
    """Background work once the app serves: load the default model (every probing tab needs it; the UI
    is built without loading weights), then build a first optimizer (it imports torch._dynamo, ~2 s)."""
    from engine.training.loop.optim import warm_up

    with contextlib.suppress(Exception):  # a missing/broken default model is reported by the model picker
        services.model("default")
    warm_up()


def startup_summary(services: Services, url: str) -> str:
    """The block printed once the app serves: its URL, the default model, the runs folder, the token cache
    and public or private mode (``services.access``)."""
    registry = services.registry()
    if registry.default_hub is not None:
        model = f"{registry.default_hub} (hub)"
    elif registry.default_dir is None or not registry.has_default():
        model = f"none ({registry.default_dir} has no config.json)"
    else:
        model = str(registry.default_dir) + (" (bundled)" if registry.default_dir == DEFAULT_MODEL_DIR else "")
    runs = services.worker.runs_root if services.worker is not None else runs_dir_from_env()
    access = services.access
    if not access.public:
        mode = f"private: everyone may train and load local models ({PUBLIC_ENV}=1 for public mode)"
    elif access.admin_token:
        mode = "public: training and local models need the admin token"
    else:
        mode = f"public: training is off ({ADMIN_TOKEN_ENV} is not set)"
    rows = [("default model", model), ("runs folder", str(configured_folder(runs))),
            ("token cache", str(configured_folder(cache_root()))), ("mode", mode),
            ("settings", 'environment variables: --help lists them, README "Configuration" explains them')]
    return "\n".join([f"BERT Explorer {package_version()} at {url}", *(f"  {name:<15}{value}" for name, value in rows)])


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the app until interrupted; ``--help`` and ``--version`` print and exit, ``--port`` and ``--host`` say
    where to serve (over GRADIO_SERVER_PORT / GRADIO_SERVER_NAME), other arguments exit 2."""
    args = argument_parser().parse_args(argv)
    services = default_services(runs_root=runs_dir_from_env())
    demo = create_app(services)
    if env_flag(warmup.DEMO_ENV):
        warmup.start(services)  # background: the examples run once while the server comes up
    where = {key: value for key, value in (("server_port", args.port), ("server_name", args.host)) if value}
    demo.launch(prevent_thread_lock=True, **{**launch_options(), **where})
    print(startup_summary(services, demo.local_url or ""), flush=True)
    # Slow first-use work runs once serving, in the background: on 2 cores it would otherwise delay the
    # first page by seconds (bench/cold_start.py).
    threading.Thread(target=after_start, args=(services,), name="after-start", daemon=True).start()
    demo.block_thread()


if __name__ == "__main__":
    main()
