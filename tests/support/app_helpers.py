"""Serving the app in-process for tests: a free loopback port, launch, a gradio_client, close."""
from __future__ import annotations

import contextlib
import socket
from typing import Iterator

import gradio as gr
from gradio_client import Client

import explorer


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(demo: gr.Blocks) -> Iterator[Client]:
    """Launch ``demo`` on loopback without blocking, yield a client for it, close it afterwards."""
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                quiet=True, theme=explorer.THEME, css=explorer.CSS)
    try:
        yield Client(demo.local_url, verbose=False)
    finally:
        demo.close()
