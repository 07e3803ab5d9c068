"""Does a folder's ``config.json`` fit its weight files, and is the model small enough? Checked before any
memory is spent on the model.

A ``config.json`` alone decides how big a model is; a hostile or careless one (2,048 hidden units x 16 layers
beside 45 MB of weights, ``max_position_embeddings`` of a million) must not make the app allocate gigabytes
before it says the weights do not fit. So loading goes: a lower bound of the config's size against the cap
(:func:`check_config_size`, plain integers, nothing built); the model built on the ``meta`` device
(:func:`build_on_meta`: shapes, no storage); the weight files' headers compared with it, key by key and shape
by shape, and its exact size against the cap (:func:`check_fits`); and only then the weights read and put in
place one tensor at a time (:func:`fill`: empty fp32 storage, each file tensor copied into it as it is read,
``weight_files.each_tensor``): no second copy of the model, no random initialisation of one that is
overwritten anyway. Loading a bert-large-sized fp16 folder peaks at about 1.1x its fp32 weights
(``bench/load_peak.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Mapping

import torch
from torch import nn

from engine.checkpoints.key_mapping import hf_key
from engine.model.config import BertConfig
from engine.model.families.registry import family_of, load_config
from engine.model.heads import BertWithHeads

DEFAULT_MAX_PARAMETERS = 2_000_000_000
"""The largest model ``load`` builds unless told otherwise (bert-large has 340M parameters)."""


class ModelTooLargeError(ValueError):
    """A model has more parameters than the loader's cap (``max_parameters``); nothing was allocated."""


def count_text(count: int) -> str:
    """A parameter count for people: ``870,123,456`` -> ``"870.1M"``, ``91,234`` -> ``"91,234"``."""
    return f"{count / 1e6:,.1f}M" if count >= 1_000_000 else f"{count:,}"


def config_size_lower_bound(config: BertConfig) -> int:
    """At least how many parameters ``config`` implies: the embeddings and the layers' weight matrices (no
    biases, no heads), in Python integers, so an absurd config cannot overflow or allocate anything."""
    hidden, inner, width = config.hidden_size, config.intermediate_size, config.embedding_width
    # no absolute position table where the family's options say so (DeBERTa's position_biased_input false,
    # ModernBERT's rotary positions)
    options = config.family_options
    tableless = options.get("position_biased_input") is False or "global_rope_theta" in options
    positions = 0 if tableless else config.max_position_embeddings
    embeddings = (config.vocab_size + positions + config.type_vocab_size) * width
    projection = width * hidden if config.embedding_size is not None else 0      # ALBERT, ELECTRA
    modules = config.num_hidden_groups or config.num_hidden_layers               # ALBERT's layers share groups
    return embeddings + projection + modules * (4 * hidden * hidden + 2 * hidden * inner)


def check_config_size(config: BertConfig, max_parameters: int, where: str) -> None:
    """``ModelTooLargeError`` when ``config`` alone implies more than ``max_parameters`` parameters."""
    lower = config_size_lower_bound(config)
    if lower > max_parameters:
        raise ModelTooLargeError(f"{where}: config.json describes a BERT of at least {count_text(lower)} parameters, "
                                 f"over the limit of {count_text(max_parameters)}")


def config_check(max_parameters: int, where: str) -> Callable[[Path], None]:
    """A check of a ``config.json`` file alone (``hub.download`` runs it before fetching any weights)."""
    return lambda path: check_config_size(load_config(path), max_parameters, where)


def build_on_meta(config: BertConfig, heads: tuple[str, ...], add_pooling_layer: bool) -> BertWithHeads:
    """``BertWithHeads`` with every parameter on the ``meta`` device: its shapes, no memory."""
    with torch.device("meta"):
        return BertWithHeads(config, heads=heads, add_pooling_layer=add_pooling_layer)


def parameter_count(model: nn.Module) -> int:
    """The number of parameters, a tied one counted once."""
    return sum(p.numel() for p in model.parameters())


def check_fits(model: BertWithHeads, state: dict[str, torch.Tensor], max_parameters: int, where: str) -> None:
    """``ValueError`` unless ``state`` (our key names; meta tensors will do) holds exactly the tensors of
    ``model`` (built from config.json) with their shapes; ``ModelTooLargeError`` when the model has more
    than ``max_parameters`` parameters. The tied MLM decoder weight is the embeddings' and is not stored."""
    tied = {model.specs[h].prefix + key for h in model.heads for key in model.specs[h].tied}
    expected = {k: t for k, t in model.state_dict().items() if k not in tied}
    implied, held = parameter_count(model), sum(t.numel() for t in state.values())
    counts = f" (config.json implies {count_text(implied)} parameters, the weight files hold {count_text(held)})"
    missing = sorted(expected.keys() - state.keys())
    if missing:
        family = family_of(model.config.model_type)
        names = [family.renames.to_theirs(key) or key for key in missing[:6]]          # as the family's files name them
        shown = ", ".join(names) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        raise ValueError(f"{where}: the weights are incomplete for a {model.config.num_hidden_layers}-layer "
                         f"{family.name}; missing {shown}{counts}")
    unexpected = sorted(state.keys() - expected.keys())
    if unexpected:
        raise ValueError(f"{where}: weights do not fit config.json (e.g. more layers than "
                         f"num_hidden_layers): unexpected {', '.join(unexpected[:6])}{counts}")
    for key, tensor in expected.items():
        if state[key].shape != tensor.shape:
            raise ValueError(f"{where}: {hf_key(key)} has shape {tuple(state[key].shape)} but config.json "
                             f"implies {tuple(tensor.shape)}{counts}")
    if implied > max_parameters:
        raise ModelTooLargeError(f"{where}: the model has {count_text(implied)} parameters, over the limit of "
                                 f"{count_text(max_parameters)}")


def fill(model: BertWithHeads, tensors: Iterable[tuple[str, torch.Tensor]], shapes: Mapping[str, torch.Tensor],
         where: str) -> BertWithHeads:
    """Put the weights into the meta-device ``model``, one tensor at a time: every parameter (and buffer) first
    gets empty CPU storage of its own, fp32 for floating point (a tied one stays one Parameter: the MLM decoder
    weight *is* the word embeddings'), then each ``(our key, tensor)`` of ``tensors`` is copied into its place
    as it comes (``copy_`` converts fp16 or bf16 to fp32 in place: no second copy of the model). ``shapes``
    (our key -> the headers' meta tensor) is what ``check_fits`` checked; a tensor of another shape, or a key
    that never comes, means the files changed after that check: ``ValueError``. ``ValueError`` too if anything
    stays on meta."""
    _allocate(model)
    places = model.state_dict(keep_vars=True)
    pending = {key: tuple(tensor.shape) for key, tensor in shapes.items()}
    changed = f"{where}: the weight files changed while the model was loading; try again"
    with torch.no_grad():
        for key, tensor in tensors:
            if key not in places or pending.pop(key, None) != tuple(tensor.shape):
                raise ValueError(changed)
            places[key].copy_(tensor)
            del tensor                                   # before the next one is read
    if pending:
        raise ValueError(changed)
    left = [name for name, tensor in [*model.named_parameters(), *model.named_buffers()] if tensor.is_meta]
    if left:
        raise ValueError(f"the weights left {', '.join(left[:6])} without values")
    return model


def _allocate(model: nn.Module) -> None:
    """Every meta parameter and buffer of ``model`` replaced by an uninitialised CPU tensor of its shape (fp32 when
    floating point), each a storage of its own (tests/training/jobs/test_given_text.py: views of a shared buffer
    trained to other bits); a Parameter several modules hold (tied) is replaced by one new Parameter in all."""
    made: dict[int, torch.Tensor] = {}
    for kind in ("parameters", "buffers"):
        for name, tensor in list(getattr(model, f"named_{kind}")(remove_duplicate=False)):
            if not tensor.is_meta:
                continue
            if id(tensor) not in made:
                empty = torch.empty(tensor.shape, device="cpu",
                                    dtype=torch.float32 if tensor.is_floating_point() else tensor.dtype)
                made[id(tensor)] = (nn.Parameter(empty, requires_grad=tensor.requires_grad)
                                    if isinstance(tensor, nn.Parameter) else empty)
            module_path, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(module_path), leaf, made[id(tensor)])
