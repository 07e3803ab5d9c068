"""What the four sections of the Heads tab share: the model with the head they need, or one clear sentence."""
from __future__ import annotations

import gradio as gr

from engine.checkpoints.hf_format import LoadedModel
from explorer.model_registry import HEAD_TITLES
from explorer.services import Services

# head -> how to get a model that has it
HOW_TO_GET = {
    "classifier": "fine-tune it for sequence classification in the Fine-tune tab",
    "token_classifier": "fine-tune it for token classification (tagging) in the Fine-tune tab",
    "multiple_choice": "fine-tune it for multiple choice in the Fine-tune tab",
    "nsp": "pretrain one with next-sentence prediction in the Training tab (the bundled default model has one)",
}


def missing_head_message(loaded: LoadedModel, head: str) -> str:
    """One sentence: which head the picked model lacks, what it has, and how to get a model with it."""
    has = ", ".join(HEAD_TITLES[h] for h in loaded.heads) or "none (encoder only)"
    return (f"The picked model ({loaded.source}) has no {HEAD_TITLES[head]} head (its heads: {has}). To try this, "
            f"{HOW_TO_GET[head]}, then pick the result in the model picker above.")


def model_with_head(services: Services, model_key: str | None, head: str) -> LoadedModel:
    """The model ``model_key`` names, or ``gr.Error`` when it lacks ``head`` (never a crash)."""
    loaded = services.model(model_key)
    if head not in loaded.heads:
        raise gr.Error(missing_head_message(loaded, head), print_exception=False)
    if loaded.tokenizer is None:
        raise gr.Error(f"The picked model ({loaded.source}) has no tokenizer files (vocab.txt or tokenizer.json), "
                       "so it cannot read text; pick another model.", print_exception=False)
    return loaded


def head_status(services: Services, model_key: str | None, head: str) -> str:
    """Markdown saying whether the picked model can run this section (shown above its inputs)."""
    try:
        with services.probing():
            loaded = services.model(model_key)
    except (ValueError, OSError):
        return ""
    if head in loaded.heads:
        return f"✅ The picked model has a {HEAD_TITLES[head]} head."
    return f"⚠️ {missing_head_message(loaded, head)}"
