"""Shared fixtures of the served-tab tests: a module that defines ``app`` (``probing_helpers.tab_app``: the
demo and its widgets) gets ``client``, that demo served on loopback; a module may define its own ``client``."""
from __future__ import annotations

from typing import Iterator

import pytest
from gradio_client import Client

from support.app_helpers import serve


@pytest.fixture(scope="module")
def client(app) -> Iterator[Client]:
    with serve(app[0]) as running:
        yield running
