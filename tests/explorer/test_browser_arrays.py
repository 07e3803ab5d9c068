"""explorer/views/browser_arrays.py: an array encoded for the browser decodes (as the browser decodes it) to the
values within the encoding's precision, refuses what it cannot carry, and what the Attention handler sends
decodes to the engine's own numbers."""
from __future__ import annotations

import base64
import zlib

import numpy as np
import pytest

from engine.probes.inference import attention
from explorer.views import browser_arrays as browser_arrays
from explorer.attention import views as attention_views
from support.probing_helpers import make_services

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("shape", [(0,), (7,), (3, 5), (2, 3, 4, 4)])
def test_uint8_round_trips_within_half_a_step(shape: tuple[int, ...]) -> None:
    values = np.random.default_rng(0).random(shape, dtype=np.float32)
    for scale in (None, 1.0):
        sent = browser_arrays.encode(values, "uint8", scale=scale)
        back = browser_arrays.decode(sent)
        assert back.shape == shape and back.dtype == np.float32 and sent["shape"] == list(shape)
        assert np.abs(back - values).max(initial=0.0) <= browser_arrays.precision(sent)
        assert browser_arrays.precision(sent) <= sent["scale"] / 510 + 1e-6
        raw = base64.b64decode(sent["data"])                                     # one byte a value
        assert len(zlib.decompress(raw) if sent["compression"] == "deflate" else raw) == values.size


def test_uint8_scale_is_the_largest_value_and_ends_are_exact() -> None:
    sent = browser_arrays.encode(np.array([0.0, 0.5, 2.0]))
    assert sent["scale"] == 2.0
    np.testing.assert_array_equal(browser_arrays.decode(sent)[[0, 2]], [0.0, 2.0])
    zeros = browser_arrays.encode(np.zeros(4))
    assert zeros["scale"] == 1.0 and not browser_arrays.decode(zeros).any()
    clipped = browser_arrays.decode(browser_arrays.encode(np.array([0.5, 1.5]), scale=1.0))
    np.testing.assert_array_equal(clipped, np.float32([128 * np.float32(1 / 255), 1.0]))   # past the scale: its top


def test_float16_keeps_the_sign_and_three_digits() -> None:
    values = np.random.default_rng(1).normal(0, 10, (6, 9)).astype(np.float32)
    sent = browser_arrays.encode(values, "float16")
    back = browser_arrays.decode(sent)
    np.testing.assert_array_equal(back, values.astype(np.float16).astype(np.float32))
    assert np.abs(back - values).max() <= browser_arrays.precision(sent)
    assert sent["compression"] == "none" and len(base64.b64decode(sent["data"])) == 2 * values.size   # small


@pytest.mark.parametrize("dtype", ["uint8", "float16"])
def test_a_peaked_array_is_deflated_and_reads_back_the_same(dtype: str) -> None:
    """Mostly-zero rows (what attention maps are) go deflated: the same numbers back, far fewer bytes; the same
    array sent uncompressed decodes to the identical values."""
    rng = np.random.default_rng(2)
    values = np.zeros((8, 64, 64), np.float32)
    values[..., 0] = rng.random((8, 64))                                           # a [CLS] column
    values[:, np.arange(64), np.arange(64)] = rng.random((8, 64))                  # and the diagonal
    packed = browser_arrays.encode(values, dtype)                                 # type: ignore[arg-type]
    plain = browser_arrays.encode(values, dtype, compress=False)                  # type: ignore[arg-type]
    assert (packed["compression"], plain["compression"]) == ("deflate", "none")
    np.testing.assert_array_equal(browser_arrays.decode(packed), browser_arrays.decode(plain))
    assert np.abs(browser_arrays.decode(packed) - values).max() <= browser_arrays.precision(packed)
    assert browser_arrays.size(packed) < 0.1 * browser_arrays.size(plain)
    assert zlib.decompress(base64.b64decode(packed["data"])) == base64.b64decode(plain["data"])   # zlib format


def test_noise_and_small_arrays_go_as_they_are() -> None:
    noise = np.random.default_rng(3).random(4096, dtype=np.float32)               # 8 random bits a byte
    assert browser_arrays.encode(noise)["compression"] == "none"
    assert browser_arrays.encode(np.zeros(100))["compression"] == "none"          # under DEFLATE_MIN_BYTES
    assert browser_arrays.encode(np.zeros(4096))["compression"] == "deflate"
    legacy = browser_arrays.encode(np.arange(4.0), compress=False)
    del legacy["compression"]                                                     # a payload that does not say
    np.testing.assert_allclose(browser_arrays.decode(legacy), np.arange(4.0), atol=3 / 510 + 1e-6)
    with pytest.raises(ValueError, match="unknown compression"):
        browser_arrays.decode({**legacy, "compression": "brotli"})


@pytest.mark.parametrize("values, dtype, message", [
    ([0.1, np.nan], "uint8", "finite"),
    ([1.0, np.inf], "float16", "finite"),
    ([-0.5, 1.0], "uint8", "values >= 0"),
    ([1.0], "int8", "unknown encoding"),
])
def test_what_it_cannot_carry_is_refused(values: list[float], dtype: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        browser_arrays.encode(np.array(values), dtype)                            # type: ignore[arg-type]


def test_what_the_attention_handler_sends_decodes_to_the_engines_maps(tiny_tokenizer) -> None:
    services = make_services(tiny_tokenizer)
    text, pair = "the cat sat on the mat", "the dog ran"
    heat, head_view, model_view, *_ = attention_views.attention_views(services, "default", text, pair, 2, 1, 64,
                                                                      [0, 3], "entropy")
    expected = attention(services.model("default"), text, pair, 64).attentions     # (L, nh, S, S) float32
    maps = browser_arrays.decode(heat["maps"])
    assert maps.shape == expected.shape and heat["tokens"][-4:] == ["the", "dog", "ran", "[SEP]"]
    assert np.abs(maps - expected).max() <= browser_arrays.precision(heat["maps"]) <= 1 / 510 + 1e-6
    assert (heat["layer"], heat["head"], head_view["heads"]) == (1, 1, [0, 3])
    grid = browser_arrays.decode(model_view["grid"])
    assert np.abs(grid - expected).max() <= browser_arrays.precision(model_view["grid"])
    assert heat["maps"]["compression"] == "deflate"                      # what the browser inflates
