"""A link's model key, checked by the picker's rules, and the picked model's shape.

:class:`PickerRules` asks ``Services.model`` itself, as the picker does when its dropdown is given a key: so a key
the visitor cannot use (a local folder on a public instance, a checkpoint a run no longer keeps, a hub model
when the hub is off, a typo) gives the sentence the picker gives, with the keys available now, and never a server
path (``ui_errors.shown``). A usable key is loaded there: the tab's button, pressed next, needs it anyway.
"""
from __future__ import annotations

import logging

from explorer.services import Services
from explorer.ui_errors import shown

LIMITS = ("layer", "head", "position")     # the largest layer (from 1), head (from 0) and token position (from 0)
log = logging.getLogger("explorer")


class PickerRules:
    """``query.ModelRules`` over the app's services."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def check(self, key: str) -> tuple[str, str | None]:
        """(the key the picker lists for ``key``: a local folder's short key, never its path; None) when the
        visitor may use ``key`` (it is loaded then), else (``key``, the picker's sentence for it)."""
        try:
            with self.services.probing():
                self.services.model(key)
            return self.services.registry().canonical(key).text, None
        except (ValueError, OSError) as exc:        # UnknownModelError, a missing folder, no network: the sentence
            return key, shown(str(exc)) or "The link's model cannot be used here; choose a model from the list."
        except Exception:  # noqa: BLE001 - a link must never break the page; the sentence says what matters
            log.exception("a link's model key failed to load")
            return key, "The link's model cannot be loaded here; choose a model from the list."

    def limits(self, key: str | None) -> dict[str, float]:
        """The largest layer, head and token position on ``key``'s model (``default`` when None); only the
        position when it cannot be read (the tab's own checks then say more)."""
        limits: dict[str, float] = {"position": self.services.max_length - 1}
        try:
            with self.services.probing():
                config = self.services.model(key or "default").config
        except Exception:  # noqa: BLE001 - the picker reports a model that does not load
            return limits
        return {**limits, "layer": config.num_hidden_layers, "head": config.num_attention_heads - 1}
