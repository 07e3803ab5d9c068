"""What an encoder module reads from its parameters, kept between inference passes.

Reading a parameter through ``nn.Module`` attribute access costs about 1 us; a BERT-mini
layer reads some twenty per pass, a few % of a short CPU forward. In inference (eval mode,
autograd off) a module derived from :class:`InferenceCached` reads them once into a tuple
(``inference_weights``) and reuses it; training, and any pass with autograd on, reads them
afresh (``read_weights``). The tuple holds the parameter (and sub-module) objects themselves,
so in-place changes to their values show through, with one exception: self-attention also
caches a fused copy of [Wq; Wk; Wv]. The tuple is dropped explicitly, with public ``torch`` only:

* on every mode change (``train()``/``eval()``): optimizer steps happen in train mode;
* on any pass with autograd on (a step may follow it, even in eval mode);
* on ``load_state_dict`` (a post-hook on each module), ``assign=True`` included;
* when ``weights_fit`` says it no longer fits (the fused copy checks its dtype and device);
* by :func:`forget_inference_caches` -- call it after changing query/key/value weights in place
  in eval mode outside autograd (``with torch.no_grad(): param.copy_(...)``; probing models are
  read-only), or after replacing a parameter or sub-module object by assignment.
"""
from __future__ import annotations

import torch
from torch import nn


class InferenceCached(nn.Module):
    """Base of the encoder modules whose forward reads a tuple of weights (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.inference_cache: tuple | None = None
        self.register_load_state_dict_post_hook(_forget_after_load)

    def train(self, mode: bool = True) -> "InferenceCached":
        """Set the mode (``eval()`` calls this too) and drop the cached tuple."""
        self.inference_cache = None
        return super().train(mode)

    def read_weights(self) -> tuple:
        """What ``forward`` reads from the parameters (or sub-modules), in the order it unpacks them."""
        raise NotImplementedError

    def inference_weights(self) -> tuple:
        """What inference caches: ``read_weights()`` unless a module adds derived copies."""
        return self.read_weights()

    def weights_fit(self, cached: tuple) -> bool:
        """Whether a cached tuple still fits the parameters (a derived copy checks its dtype and device)."""
        return True

    def cached_weights(self) -> tuple | None:
        """The cached tuple in inference (built on first use); ``None`` when training or autograd is on."""
        if self.training or torch.is_grad_enabled():
            if self.inference_cache is not None:
                self.inference_cache = None          # autograd on: an optimizer step may follow, even in eval mode
            return None
        cached = self.inference_cache
        if cached is None or not self.weights_fit(cached):
            cached = self.inference_cache = self.inference_weights()
        return cached


def _forget_after_load(module: InferenceCached, incompatible_keys: object) -> None:
    """``load_state_dict`` post-hook: with ``assign=True`` the parameters are new objects."""
    module.inference_cache = None


def forget_inference_caches(model: nn.Module) -> None:
    """Drop every cached weight tuple in ``model`` (see the module docstring for when to call it)."""
    for module in model.modules():
        if isinstance(module, InferenceCached):
            module.inference_cache = None
