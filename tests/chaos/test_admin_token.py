"""Issue 45, item 5: the admin token is compared exactly as given. A token with a leading or trailing space, a tab
and a newline around it, or a leading non-breaking space was stripped and let in; now only the exact token
passes (``hmac.compare_digest`` on its UTF-8 bytes), an empty one never does, and the operator's configured token
may still end in the newline a secrets file leaves."""
from __future__ import annotations

import gradio as gr
import pytest

from explorer.serving.access import ADMIN_TOKEN_ENV, PUBLIC_ENV, AccessPolicy

SECRET = "s3cret-tøken"


@pytest.fixture
def policy() -> AccessPolicy:
    return AccessPolicy.from_env({PUBLIC_ENV: "1", ADMIN_TOKEN_ENV: SECRET})


def test_the_exact_token_passes(policy):
    assert policy.is_admin(SECRET)
    policy.require_admin(SECRET)                                   # no error


@pytest.mark.parametrize("near", [f" {SECRET}", f"{SECRET} ", f"\t{SECRET}\n", f"\u00a0{SECRET}", f"{SECRET}\u00a0",
                                  f"{SECRET}\r\n", f"\u200b{SECRET}", SECRET.upper(), SECRET[:-1], f"{SECRET}x"])
def test_a_token_with_anything_around_it_is_refused(policy, near):
    assert not policy.is_admin(near)
    with pytest.raises(gr.Error, match="The admin token is wrong"):
        policy.require_admin(near, "start training")


@pytest.mark.parametrize("empty", ["", None, " ", "\n"])
def test_no_token_is_refused_as_none_given(policy, empty):
    assert not policy.is_admin(empty)
    with pytest.raises(gr.Error, match="No admin token was given"):
        policy.require_admin(empty)


@pytest.mark.parametrize("odd", [123, b"s3cret", ["s3cret-tøken"], "\ud800"])
def test_odd_values_are_refused_without_a_crash(policy, odd):
    assert not policy.is_admin(odd)


def test_an_empty_configured_token_lets_nobody_in():
    for configured in ("", "   ", "\n"):
        policy = AccessPolicy.from_env({PUBLIC_ENV: "1", ADMIN_TOKEN_ENV: configured})
        assert not policy.training_enabled
        assert not any(policy.is_admin(token) for token in ("", " ", "\n", configured, None))
    assert not AccessPolicy(public=True, admin_token="").is_admin("")


def test_the_configured_token_loses_the_newline_of_a_secrets_file():
    policy = AccessPolicy.from_env({PUBLIC_ENV: "1", ADMIN_TOKEN_ENV: f"{SECRET}\n"})
    assert policy.is_admin(SECRET)
    assert not policy.is_admin(f"{SECRET}\n")                      # the given token is still taken as typed


def test_private_mode_needs_no_token():
    assert AccessPolicy.from_env({ADMIN_TOKEN_ENV: SECRET}).is_admin(None)
