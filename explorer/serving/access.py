"""Who may do what: the app's access policy, read from the environment once per app.

Private mode (the default) lets everyone do everything, as on your own machine. Public mode
(``EXPLORER_PUBLIC=1``, for a Space or a live demo) keeps probing open to all but puts the
training controls and loading models from local folders behind an admin token
(``EXPLORER_ADMIN_TOKEN``). Public mode without a token disables those controls entirely.

The configured token has its surrounding whitespace stripped (a secrets file or ``echo`` leaves a trailing
newline); a token given by a visitor is compared exactly as typed, byte for byte, with ``hmac.compare_digest``.
"""
from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import gradio as gr

PUBLIC_ENV = "EXPLORER_PUBLIC"
ADMIN_TOKEN_ENV = "EXPLORER_ADMIN_TOKEN"
_TRUE = ("1", "true", "yes", "on")


def env_flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment variable ``name`` is switched on (1/true/yes/on)."""
    env = os.environ if environ is None else environ
    return env.get(name, "").strip().lower() in _TRUE


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    """A whole-number setting from ``env`` (``default`` when unset); ValueError names the setting."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be {'0 or more' if minimum == 0 else f'at least {minimum}'}, got {value}")
    return value


@dataclass(frozen=True)
class AccessPolicy:
    """Public or private mode, and the admin token (never shown in reprs or messages)."""

    public: bool = False
    admin_token: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AccessPolicy:
        """The policy that ``EXPLORER_PUBLIC`` and ``EXPLORER_ADMIN_TOKEN`` describe (the token stripped of
        surrounding whitespace: an operator's trailing newline is no part of it)."""
        env = os.environ if environ is None else environ
        return cls(public=env_flag(PUBLIC_ENV, env), admin_token=env.get(ADMIN_TOKEN_ENV, "").strip())

    @property
    def asks_for_token(self) -> bool:
        """Whether the UI shows "Admin token" boxes (public mode with a token configured)."""
        return self.public and bool(self.admin_token)

    @property
    def training_enabled(self) -> bool:
        """False only in public mode without a configured admin token."""
        return not self.public or bool(self.admin_token)

    def is_admin(self, token: str | None) -> bool:
        """True in private mode, or when ``token`` is exactly the admin token: no stripping, so ``' secret'`` or
        ``'secret\\n'`` is refused; compared as UTF-8 bytes in constant time. An empty token never passes."""
        if not self.public:
            return True
        if not self.admin_token or not isinstance(token, str) or not token:
            return False
        return hmac.compare_digest(_utf8(token), _utf8(self.admin_token))

    def require_admin(self, token: str | None, action: str = "use the training controls") -> None:
        """Raise ``gr.Error`` (with a message saying what to do) unless the caller may ``action``."""
        if self.is_admin(token):
            return
        if not self.admin_token:
            raise gr.Error(f"This is a public instance: you cannot {action} here. The operator has not set "
                           f"{ADMIN_TOKEN_ENV}, so these controls are switched off.", print_exception=False)
        given = isinstance(token, str) and bool(token.strip())
        what = "The admin token is wrong" if given else "No admin token was given"
        raise gr.Error(f"{what}: on this public instance only the admin may {action}. "
                       "Enter the token in the 'Admin token' box.", print_exception=False)

    def notice(self) -> str:
        """Markdown for the Training tab: what public mode means here ('' in private mode)."""
        if not self.public:
            return ""
        if not self.admin_token:
            return ("🔒 **Public instance:** training is switched off here (no admin token is configured). "
                    "Probe the bundled model and the existing checkpoints in the other tabs.")
        return "🔒 **Public instance:** the training controls need the admin token."


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8 (lone surrogates, which a request or the environment may carry, encoded as they are)."""
    return text.encode("utf-8", "surrogatepass")
