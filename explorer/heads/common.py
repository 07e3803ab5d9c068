"""What the sections of the Heads tab share: the model with the head they need, or one clear sentence."""
from __future__ import annotations

import gradio as gr

from engine.model.loaded_model import LoadedModel
from explorer.models.description import missing_head_message, specs_of
from explorer.services import Services


def model_with_head(services: Services, model_key: str | None, head: str) -> LoadedModel:
    """The model ``model_key`` names, or ``gr.Error`` when it lacks ``head`` (``ValueError``, which the tab's
    ``friendly_errors`` shows, when it has no tokenizer); never a crash."""
    loaded = services.model(model_key)
    if head not in loaded.heads:
        raise gr.Error(missing_head_message(loaded, head), print_exception=False)
    loaded.require_tokenizer("so it cannot read text; pick another model")
    return loaded


def head_status(services: Services, model_key: str | None, head: str) -> str:
    """Markdown saying whether the picked model can run this section (shown above its inputs)."""
    try:
        with services.probing():
            loaded = services.model(model_key)
    except (ValueError, OSError):
        return ""
    if head in loaded.heads:
        return f"✅ The picked model has a {specs_of(loaded)[head].title} head."
    return f"⚠️ {missing_head_message(loaded, head)}"
