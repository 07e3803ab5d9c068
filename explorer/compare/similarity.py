"""What the Compare tab shows of how alike two models' layers are: debiased linear CKA over the bundled sentence set
first, this input's beside it, each with its token count, and a caution when the tokens are few.

The sentence set's hidden states depend only on the model, not on who asks, so they are kept once for every
visitor in the forward cache (``STATES_VISITOR``: at most ``ENTRIES_PER_VISITOR`` models' states at a time, within
the cache's byte bound, each answering only for its very model object), and so is each pair's CKA
(``PAIRS_VISITOR``: a few hundred bytes, answering only while both model objects are the ones it was computed
for). The CKA itself runs in the engine (``engine.probes.comparison.sentence_set``); this module only words and
arranges its numbers.
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

from engine.model.loaded_model import LoadedModel
from engine.probes.comparison.cka import MIN_DEBIASED_SAMPLES
from engine.probes.comparison.compare import ModelComparison
from engine.probes.comparison.sentence_set import (SAMPLE_NAME, SetComparison, compare_sentence_states,
                                                   sentence_states)
from explorer.compare import plots
from explorer.compare.alignment import depth_summary
from explorer.formatting import sig
from explorer.services import Services

STATES_VISITOR = "compare: sentence set states"    # slots of the forward cache shared by every visitor
PAIRS_VISITOR = "compare: sentence set CKA"
STATES_KEY = ("compare_sentence_set",)


def set_comparison(services: Services, a: LoadedModel, b: LoadedModel) -> SetComparison | str:
    """CKA of every layer pair of ``a`` and ``b`` over the bundled sentence set: each model's states computed once,
    and the pair's CKA once, while the cache keeps them; a sentence saying why instead when the set cannot be
    compared (no sentence could be lined up by words)."""
    cache = services.forward_cache
    pair_key = ("compare_sentence_set_cka", id(b.model))
    kept = cache.get(PAIRS_VISITOR, a.model, pair_key)
    if kept is not None and kept[0]() is b.model:              # B is that very model object, not a reused id
        return kept[1]
    states_a = cache.get_or_compute(STATES_VISITOR, a.model, STATES_KEY, lambda: sentence_states(a))
    states_b = cache.get_or_compute(STATES_VISITOR, b.model, STATES_KEY, lambda: sentence_states(b))
    try:
        result: SetComparison | str = compare_sentence_states(a, b, states_a, states_b)
    except ValueError as error:
        result = f"ℹ️ Over the sentence set: {error}; the figures show this input only."
    cache.put(PAIRS_VISITOR, a.model, pair_key, (weakref.ref(b.model), result))
    return result


def _unit(unit: str, count: int) -> str:
    """"1,052 tokens", "1 word"."""
    word = unit.rstrip("s")
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def set_label(result: SetComparison) -> str:
    """"1,052 tokens of 80 sentences": what the set's CKA runs over."""
    return f"{_unit(result.unit, result.samples)} of {result.sentences} sentences"


def input_label(comparison: ModelComparison) -> str:
    """"8 tokens" (or words): what this input's CKA runs over."""
    return _unit("tokens" if comparison.alignment is None else "words", comparison.samples)


def caution(comparison: ModelComparison) -> str | None:
    """The warning for this input's CKA when it has fewer tokens than the models have dimensions, else None."""
    if not comparison.few:
        return None
    return (f"⚠️ This input has {input_label(comparison)}, fewer than the {comparison.width:,} dimensions of the "
            "models' vectors: its CKA says little about the models. The plain estimator is biased towards 1 on so few "
            "tokens (two unrelated random representations of 8 tokens in 384 dimensions score about 0.98) and the "
            "debiased one scatters widely around the truth; read the sentence set's line.")


def _spread(values: Sequence[float]) -> str:
    """"0.12" or "−0.18 to 0.05" over the finite values; "–" when there are none."""
    finite = [float(v) for v in values if math.isfinite(float(v))]
    if not finite:
        return "–"
    low, high = min(finite), max(finite)
    return sig(low) if sig(low) == sig(high) else f"{sig(low)} to {sig(high)}"


def _layers_line(result: SetComparison, over: str) -> str:
    """One sentence on the debiased CKA per layer (pairs matched by relative depth when the depths differ)."""
    if result.same_depth_cka is None:
        return depth_summary(result, over)
    values = result.matched_cka
    finite = [i for i, v in enumerate(values) if math.isfinite(float(v))]
    if not finite:
        return f"Representations {over}: debiased linear CKA could not be computed."
    low = min(finite, key=lambda i: float(values[i]))
    return (f"Representations {over}: debiased linear CKA {sig(float(values[0]))} at layer 0 (the embeddings' "
            f"output), {sig(float(values[-1]))} at the last layer ({len(values) - 1}); least alike at "
            f"**{plots.layer_names(len(values))[low]}** ({sig(float(values[low]))}).")


def summary_lines(comparison: ModelComparison, over_set: SetComparison | str) -> list[str]:
    """What the summary says of the layers: the sentence set's CKA, this input's (debiased and plain) with its
    token count, and the caution when its tokens are few."""
    alike = [comparison.same_depth_cka] + ([over_set.same_depth_cka] if isinstance(over_set, SetComparison) else [])
    if all(d is not None and bool((d > 1 - 1e-6).all()) for d in alike) and comparison.samples >= MIN_DEBIASED_SAMPLES:
        return ["Representations: the same at every layer (debiased linear CKA 1"
                + (f" over {set_label(over_set)} and" if isinstance(over_set, SetComparison) else "")
                + " on this input): the two models agree."]
    lines = []
    if isinstance(over_set, SetComparison):
        lines.append(_layers_line(over_set, f"over {SAMPLE_NAME} (**{set_label(over_set)}**)"))
    else:
        lines.append(over_set)
    if comparison.samples < MIN_DEBIASED_SAMPLES:
        plain = _spread(comparison.matched(comparison.plain_cka))
        lines.append(f"On this input alone ({input_label(comparison)}): debiased CKA needs at least "
                     f"{MIN_DEBIASED_SAMPLES}; the plain estimator gives {plain}.")
    else:
        lines.append(f"On this input alone (**{input_label(comparison)}**): debiased linear CKA "
                     f"{_spread(comparison.matched_cka)} over the layers, the plain estimator "
                     f"{_spread(comparison.matched(comparison.plain_cka))}.")
    warning = caution(comparison)
    if warning:
        lines.append(warning)
    return lines


def similarity_lines(comparison: ModelComparison, over_set: SetComparison | str) -> list[plots.Line]:
    """The similarity figure's lines: the set's debiased CKA, this input's debiased and plain CKA, and the mean
    cosine when the widths and depths are equal, each named with what it runs over."""
    lines = []
    if isinstance(over_set, SetComparison):
        lines.append(plots.Line(f"debiased CKA, sentence set ({set_label(over_set)})", over_set.matched_cka, "set"))
    count = input_label(comparison)
    if comparison.samples >= MIN_DEBIASED_SAMPLES:
        lines.append(plots.Line(f"debiased CKA, this input ({count})", comparison.matched_cka, "input"))
    lines.append(plots.Line(f"plain CKA, this input ({count})", comparison.matched(comparison.plain_cka), "plain"))
    if comparison.cosine is not None:
        unit = "token" if comparison.alignment is None else "word"
        lines.append(plots.Line(f"mean {unit} cosine, this input", comparison.cosine, "cosine"))
    return lines


def figure_note(comparison: ModelComparison, over_set: SetComparison | str) -> str:
    """The similarity figure's subtitle: what its main line runs over, and the caution in a few words."""
    parts = [f"debiased linear CKA over {set_label(over_set)}" if isinstance(over_set, SetComparison)
             else "this input only"]
    if comparison.few:
        parts.append(f"⚠ this input: {input_label(comparison)}, fewer than its {comparison.width:,} dimensions: "
                     "its CKA is noisy")
    return " · ".join(parts)
