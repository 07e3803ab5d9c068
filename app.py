"""BERT Explorer: ``python app.py`` builds the Gradio app and serves it.

Offline by default: analytics off and the Hugging Face hub in offline mode unless the
environment says otherwise. Host and port come from GRADIO_SERVER_NAME /
GRADIO_SERVER_PORT (Gradio reads them; default 127.0.0.1:7860).
"""
from __future__ import annotations

import os
import threading

# Must happen before gradio (or huggingface_hub) is imported anywhere.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402

from explorer import CSS, THEME, build_app  # noqa: E402
from explorer.services import Services  # noqa: E402

# Concurrent requests per event (tokenization is cheap; model work is CPU/GPU bound).
CONCURRENCY = int(os.environ.get("EXPLORER_CONCURRENCY", "2"))
QUEUE_MAX_SIZE = 64


def create_app(services: Services | None = None) -> gr.Blocks:
    """Build the app with its queue configured (no launch); default services when none given."""
    demo = build_app(services)
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=QUEUE_MAX_SIZE)
    return demo


def main() -> None:
    """Build and serve the app until interrupted."""
    from engine.optim import warm_up

    # The first optimizer of a process is slow to build; pay for it while nobody waits.
    threading.Thread(target=warm_up, name="optimizer-warm-up", daemon=True).start()
    create_app().launch(theme=THEME, css=CSS, share=False)


if __name__ == "__main__":
    main()
