"""Which input tokens pushed a prediction up or down: attributions on the word embeddings, with captum.

``attribute(loaded, task, text, ...)`` explains one score of one head (docs/design/attribution.md):
the logit (or probability) of a fill-mask token at a ``[MASK]``, of the QA
answer's start or end, of an NSP label, a class, a word's tag or a choice. Two methods, both
captum's, both on the output of ``bert.embeddings.word_embeddings`` (position and segment
embeddings are not attributed):

* ``integrated_gradients``: ``LayerIntegratedGradients`` from a baseline in which every token but
  ``[CLS]``, ``[SEP]`` and ``[MASK]`` is ``[PAD]`` (captum's BERT tutorials' reference; each family's own specials
  by role: RoBERTa's ``<s>``, ``</s>``, ``<mask>`` and ``<pad>``), on
  ``n_steps`` Gauss-Legendre points. The attributions add up to F(input) - F(baseline) up to
  captum's convergence delta (sum - difference), which is returned and shown;
* ``gradient_x_input``: ``LayerGradientXActivation``, the gradient of the score times the word
  embedding, one backward pass; no baseline and no completeness.

Each token's attribution is summed over the hidden size. The model runs in eval mode and fp32 on a
private view of the served model: new module objects that share the parameters' storage (no copy
of the weights) with gradients off. Captum hooks ``word_embeddings`` while it runs; on the shared
module that hook would also catch another request's forward pass in another thread, and the view
keeps the shared model's inference caches (``engine.model.inference_cache``) untouched.
"""
from __future__ import annotations

import copy
import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.checks import is_int
from engine.model.head_specs import AttributionSpec, attribution_targets
from engine.model.heads import BertWithHeads
from engine.model.inference_cache import InferenceCached, forget_inference_caches
from engine.probes.attribution.targets import Target

METHODS = {"integrated_gradients": "integrated gradients", "gradient_x_input": "gradient × input"}
SCORES = ("logit", "probability")
DEFAULT_STEPS = 50
MAX_STEPS = 300
IG_RULE = "gausslegendre"          # captum's default: converges in far fewer steps than a Riemann sum
BATCH_TOKENS = 2048                # tokens per forward/backward batch (n_steps rows of S tokens are split)
# the baseline: the padding token everywhere but the tokens of these roles (BERT's [CLS], [SEP], [MASK]; RoBERTa's
# <s>, </s>, <mask>), found by role, so every family's baseline keeps its own specials
KEPT_ROLES = ("cls", "sep", "mask", "bos", "eos")


@dataclass
class Attribution:
    """How much each input token pushed one score up (positive) or down (negative)."""

    task: str                         # one of target_names()
    source: str                       # which model (LoadedModel.source)
    tokens: list[str]                 # S pieces of the row attributed, specials included
    token_type_ids: list[int]
    attributions: list[float]         # (S,) per token, summed over the hidden size
    method: str                       # one of METHODS
    score: str                        # "logit" or "probability"
    target: str                       # what is explained, in words
    target_position: int | None       # the token whose output the head reads (None: a pooled head, or a whole row)
    prediction: str                   # what the model predicts there, in words
    target_score: float               # F(input)
    baseline: str | None              # the baseline in words (None for gradient x input)
    baseline_tokens: list[str] | None  # the baseline row (None for gradient x input)
    baseline_score: float | None      # F(baseline) (None for gradient x input)
    convergence_delta: float | None   # captum's: sum(attributions) - (F(input) - F(baseline))
    n_steps: int | None               # integration points (None for gradient x input)
    warnings: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        """The sum of the attributions (integrated gradients: F(input) - F(baseline) + delta)."""
        return float(math.fsum(self.attributions))

    def top(self, k: int = 10) -> list[tuple[int, str, float]]:
        """The ``k`` largest attributions by size: (position, token, value), largest first (stable)."""
        order = sorted(range(len(self.attributions)), key=lambda i: -abs(self.attributions[i]))
        return [(i, self.tokens[i], self.attributions[i]) for i in order[:k]]

    def as_dict(self) -> dict:
        """JSON-ready: every field, plus the sum."""
        return {"task": self.task, "source": self.source, "tokens": list(self.tokens),
                "attributions": list(self.attributions), "sum": self.total, "method": self.method,
                "score": self.score, "target": self.target, "target_position": self.target_position,
                "prediction": self.prediction,
                "target_score": self.target_score, "baseline": self.baseline, "baseline_tokens": self.baseline_tokens,
                "baseline_score": self.baseline_score, "convergence_delta": self.convergence_delta,
                "n_steps": self.n_steps, "warnings": list(self.warnings)}


def attribute(loaded: LoadedModel, task: str, text: str, text_pair: str | Sequence[str] | None = None,
              target: str | None = None, which: int | None = None, method: str = "integrated_gradients",
              n_steps: int = DEFAULT_STEPS, score: str = "logit",
              progress: Callable[[float], None] | None = None) -> Attribution:
    """Explain one prediction of ``task`` (``target_names()``) on ``text`` (and ``text_pair``).

    ``fill_mask``: ``which`` [MASK] (0-based, default 0), ``target`` token (default the top prediction).
    ``qa_start`` / ``qa_end``: ``text`` is the question, ``text_pair`` the context; the best answer's start or end.
    ``next_sentence``: ``target`` label ``IsNext`` (default) or ``NotNext``. ``classify``: ``target`` label
    (default the predicted one). ``tag``: ``which`` word (0-based; default the first not tagged O) and its
    ``target`` tag (default the predicted one). ``choose``: ``text`` is the context, ``text_pair`` the choices
    (a list, or one per line), ``which`` choice (0-based, default the model's pick).
    ``progress(fraction)`` is called after each forward pass. Raises ``ValueError`` on bad input.
    """
    return explain(loaded, make_target(loaded, task, text, text_pair, target, which), method, n_steps, score,
                   progress)


def make_target(loaded: LoadedModel, task: str, text: str, text_pair: str | Sequence[str] | None = None,
                target: str | None = None, which: int | None = None) -> Target:
    """The :class:`Target` of :func:`attribute`'s arguments (``ValueError`` for an unknown task or bad input):
    the builder the task's head declares (``HeadSpec.attribution``)."""
    build = builder(task)                 # ValueError for an unknown task
    loaded.require_tokenizer()
    return build(loaded, text, text_pair, target, which)


def target_names() -> tuple[str, ...]:
    """The predictions attribution explains: every registered head's ``AttributionSpec`` names, in order."""
    return tuple(attribution_targets())


def target_spec(task: str) -> tuple[str, AttributionSpec]:
    """(the head that makes prediction ``task``, its ``AttributionSpec``); ``ValueError`` for an unknown one."""
    found = attribution_targets().get(task) if isinstance(task, str) else None
    if found is None:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(target_names())}")
    return found


def builder(task: str) -> Callable[..., Target]:
    """The target builder of ``task``: its spec's function, or its ``"module:function"`` imported now."""
    named = target_spec(task)[1].builder
    if callable(named):
        return named
    module, _, function = named.partition(":")
    return getattr(importlib.import_module(module), function)


def explain(loaded: LoadedModel, target: Target, method: str = "integrated_gradients", n_steps: int = DEFAULT_STEPS,
            score: str = "logit", progress: Callable[[float], None] | None = None) -> Attribution:
    """Run captum on ``target`` (see the module docstring) and return the :class:`Attribution`."""
    from captum.attr import LayerGradientXActivation, LayerIntegratedGradients   # imports matplotlib: ~1 s, once

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose logit or probability")
    integrated = method == "integrated_gradients"
    if integrated and (not is_int(n_steps) or not 2 <= n_steps <= MAX_STEPS):
        raise ValueError(f"n_steps must be a whole number from 2 to {MAX_STEPS}, got {n_steps!r}")
    model = private_view(loaded.model)
    device = next(model.parameters()).device
    tokenizer = loaded.tokenizer
    ids = torch.tensor([target.input_ids], device=device)                              # (1, S)
    kept = list(dict.fromkeys(t for t in (tokenizer.roles.get(role) for role in KEPT_ROLES) if t is not None))
    kept_ids = {tokenizer.token_to_id(t) for t in kept} - {None}
    base = torch.tensor([[t if t in kept_ids else tokenizer.pad_token_id for t in target.input_ids]],
                        device=device)                                                  # (1, S)
    rows_per_batch = max(1, BATCH_TOKENS // ids.shape[1])
    calls = 1 + (2 + math.ceil(n_steps / rows_per_batch) + 2 if integrated else 1)      # forward passes expected
    done = [0]

    def forward(input_ids: torch.Tensor) -> torch.Tensor:                              # (N, S) -> (N,)
        cancellation.check()                    # between integration batches: a cancelled request stops here
        out = pick(target.class_scores(model, input_ids), target.index, score, target.sigmoid)
        done[0] += 1
        if progress is not None:
            progress(min(1.0, done[0] / calls))
        return out

    layer = model.bert.embeddings.word_embeddings
    with torch.inference_mode(False), torch.enable_grad(), torch.autocast(device.type, enabled=False):
        with torch.no_grad():
            at_input, at_baseline = forward(torch.cat([ids, base])).tolist()           # (2, S) -> (2,)
        if integrated:
            found, delta = LayerIntegratedGradients(forward, layer, multiply_by_inputs=True).attribute(
                ids, baselines=base, n_steps=n_steps, method=IG_RULE, internal_batch_size=rows_per_batch,
                return_convergence_delta=True)                                          # (1, S, H), (1,)
        else:
            found, delta = LayerGradientXActivation(forward, layer, multiply_by_inputs=True).attribute(ids), None
        per_token = found.detach()[0].double().sum(-1)                                  # (S, H) -> (S,)
    return Attribution(
        task=target.task, source=loaded.source, tokens=list(target.tokens), token_type_ids=list(target.token_type_ids),
        attributions=per_token.cpu().tolist(), method=method, score=score, target=target.description,
        target_position=target.position,
        prediction=target.prediction, target_score=at_input,
        baseline=f"{tokenizer.pad_token} for every token but {', '.join(kept)}" if integrated else None,
        baseline_tokens=[tokenizer.id_to_token(int(t)) for t in base[0]] if integrated else None,
        baseline_score=at_baseline if integrated else None,
        convergence_delta=float(delta.reshape(-1)[0]) if delta is not None else None,
        n_steps=n_steps if integrated else None, warnings=list(target.warnings))


def pick(scores: torch.Tensor, index: int, score: str, sigmoid: bool = False) -> torch.Tensor:
    """Column ``index`` of a head's scores (N, K): the logit, or its probability (softmax over the K classes;
    the sigmoid for a one-label classifier)."""
    scores = scores.float()                                                              # (N, K)
    if score == "logit":
        return scores[:, index]
    if sigmoid:
        return scores[:, index].sigmoid()
    return scores.softmax(-1)[:, index]


def private_view(model: BertWithHeads) -> BertWithHeads:
    """New module objects over the same parameter storage, gradients off, in eval mode, with no inference caches.

    Hooks and mode changes on the view never reach ``model`` (which other requests may be running), and no
    weight is copied. Raises ``ValueError`` for weights that are not fp32 (attributions are computed in fp32).
    """
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise ValueError("attributions are computed in fp32, and this model's weights are not fp32")
    memo: dict[int, object] = {id(p): nn.Parameter(p.detach(), requires_grad=False) for p in model.parameters()}
    memo.update({id(b): b for b in model.buffers()})
    for module in model.modules():                     # the cached tuples stay behind (and hold inference tensors)
        if isinstance(module, InferenceCached) and module.inference_cache is not None:
            memo[id(module.inference_cache)] = None
    view = copy.deepcopy(model, memo)
    forget_inference_caches(view)
    return view.eval()
