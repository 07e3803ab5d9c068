"""Small random models, padded batches, a tiny vocabulary and tiny training jobs for ``scripts.gpu.correctness``.

Everything here is built in a fraction of a second, on any device, from the engine alone: the GPU machine has
torch, transformers and tokenizers but no gradio, plotly, datasets, captum or seqeval, and never tests/.
"""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers.utils import logging as hf_logging

from engine.checkpoints.hf_format import save
from engine.model.config import BertConfig
from engine.model.head_specs import HeadSpec
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from engine.training.tasks.job_spec import JobSpec
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.pretraining import PRETRAINING

WORDS = ("the a an is was of and to in it that he she they we you on for with as at by from this "
         "cat dog sat mat bird sang tree car red blue big small run ran walk play played house "
         "question answer what who where when why how model test word piece text token").split()
_LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")
VOCAB = list(dict.fromkeys(SPECIAL_TOKENS + _LETTERS + tuple(f"##{c}" for c in _LETTERS) + tuple(".,?!'")
                           + tuple(WORDS) + ("##s", "##ed", "##ing", "##ly", "##er")))

# Odd sizes (3 heads of 16, intermediate 100), pad id 1, a non-default LayerNorm eps, 3 labels, classifier dropout:
# a model that ignored one of them in the Hugging Face layout would differ from transformers.
PARITY_CONFIG = BertConfig(vocab_size=211, hidden_size=48, num_attention_heads=3, intermediate_size=100,
                           num_hidden_layers=3, max_position_embeddings=40, pad_token_id=1, layer_norm_eps=1e-5,
                           id2label={0: "a", 1: "b", 2: "c"}, classifier_dropout=0.2)
# The tiny model of the training and probing checks: 32 wide, 2 layers, 4 heads.
TINY_MODEL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                  max_position_embeddings=64)


def tiny_tokenizer() -> WordPieceTokenizer:
    """A fixed WordPiece vocabulary of ~120 pieces: the specials, letters, punctuation and ``WORDS``."""
    return WordPieceTokenizer.from_vocab({token: i for i, token in enumerate(VOCAB)})


def documents(count: int = 12, seed: int = 0) -> list[list[str]]:
    """``count`` documents of 6 sentences; each walks one of four disjoint word cycles (text an MLM can learn)."""
    rng = random.Random(seed)
    cycles = [list(WORDS)[i::4] for i in range(4)]
    docs = []
    for d in range(count):
        cycle, pos, doc = cycles[d % 4], rng.randrange(100), []
        for _ in range(6):
            n = rng.randint(4, 8)
            doc.append(" ".join(cycle[(pos + j) % len(cycle)] for j in range(n)) + ".")
            pos += n
        docs.append(doc)
    return docs


@torch.no_grad()
def randomize_(model: torch.nn.Module, seed: int, scale: float = 0.1) -> torch.nn.Module:
    """Non-trivial values for every parameter: biases non-zero, LayerNorm weights around 1 (BERT's init would
    leave biases 0 and LayerNorm 1/0, hiding a missing bias or affine)."""
    generator = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():              # a tied parameter is listed once
        noise = torch.randn(param.shape, generator=generator) * scale
        param.copy_(1.0 + noise if "LayerNorm.weight" in name else noise)
    return model


def padded_batch(config: BertConfig, batch_size: int = 3, seq_len: int = 11, seed: int = 0) -> dict[str, torch.Tensor]:
    """input_ids, attention_mask and token_type_ids (B, S): row i has S - 3i mod S real tokens, then padding;
    the second half of each row's real tokens is segment B."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, config.vocab_size, (batch_size, seq_len), generator=generator)
    input_ids[input_ids == config.pad_token_id] = (config.pad_token_id + 1) % config.vocab_size
    attention_mask = torch.zeros(batch_size, seq_len, dtype=torch.long)
    token_type_ids = torch.zeros(batch_size, seq_len, dtype=torch.long)
    for row in range(batch_size):
        length = seq_len - (3 * row) % seq_len
        attention_mask[row, :length] = 1
        input_ids[row, length:] = config.pad_token_id
        token_type_ids[row, length // 2:length] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def head_inputs(spec: HeadSpec, config: BertConfig, device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """A padded batch for ``spec``'s head on ``device``: (3, 11), or (2, 3, 9) for a choice head."""
    if not spec.choice_input:
        return {k: v.to(device) for k, v in padded_batch(config, 3, 11, seed).items()}
    flat = padded_batch(config, 2 * 3, 9, seed)
    return {k: v.view(2, 3, 9).to(device) for k, v in flat.items()}        # (B*C, S) -> (B, C, S)


def head_pair(spec: HeadSpec, device: torch.device, folder: Path, attn: str, seed: int = 0
              ) -> tuple[BertWithHeads, torch.nn.Module]:
    """Our random model with ``spec``'s head alone and ``spec.hf_class`` loaded from its Hugging Face export in
    ``folder``, both fp32 in eval mode on ``device``. ``ValueError`` when transformers reports a key missing,
    unexpected or of another shape."""
    torch.manual_seed(seed)
    ours = randomize_(BertWithHeads(PARITY_CONFIG, (spec.name,)), seed).to(device).eval()
    save(ours, None, folder, architectures=[spec.hf_class])
    hf_class = getattr(transformers, spec.hf_class)
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()                         # no "Loading weights" bar per head in the log
    try:
        theirs, info = hf_class.from_pretrained(folder, attn_implementation=attn, dtype=torch.float32,
                                                output_loading_info=True)
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    wrong = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if wrong:
        raise ValueError(f"{spec.hf_class} does not load our export exactly: {wrong}")
    return ours, theirs.to(device).eval()


def paired_outputs(spec: HeadSpec, ours: BertWithHeads, theirs: torch.nn.Module, inputs: dict[str, torch.Tensor]
                   ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(ours, theirs) per compared tensor: each ``*logits`` field of our head's result (mlm: the dense logits;
    qa: start and end) against transformers' field of the same name, and the last hidden state."""
    with torch.no_grad():
        out = ours(**inputs)
        hf = theirs(**inputs, output_hidden_states=True)
    result = out.result(spec.name)
    pairs = {f.name: (getattr(result, f.name), getattr(hf, f.name)) for f in dataclasses.fields(result)
             if f.name.endswith("logits") and isinstance(getattr(result, f.name), torch.Tensor)}
    if not pairs:
        raise ValueError(f"the {spec.name} head's result has no *logits tensor to compare")
    pairs["last_hidden_state"] = (out.encoder.last_hidden_state, hf.hidden_states[-1])   # (B[*C], S, H) both
    return pairs


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| in float64; ``ValueError`` when the shapes differ."""
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    return (a.detach().double() - b.detach().double()).abs().max().item()


def relative_diff(a: torch.Tensor, b: torch.Tensor, reference: torch.Tensor) -> float:
    """max |a - b| / max |reference|: a difference on the scale of the values."""
    return max_abs_diff(a, b) / max(reference.detach().double().abs().max().item(), 1e-30)


def write_corpus(folder: Path) -> Path:
    """``documents()`` as ``folder/corpus.txt`` (one sentence a line, documents between blank lines). A file, not
    ``JobSpec.documents``: the engine tokenises in-memory documents in a pool of spawned processes (seconds on a
    16-core machine, for a few hundred words), a small file in this process."""
    path = Path(folder) / "corpus.txt"
    path.write_text("\n\n".join("\n".join(doc) for doc in documents()) + "\n", encoding="utf-8")
    return path


def pretraining_spec(device: torch.device, run_dir: Path | None, tokenizer_dir: Path, corpus: Path,
                     **training: Any) -> JobSpec:
    """A tiny pretraining job on ``device`` (precision auto: bf16 autocast on CUDA, fp32 on CPU), seed 3, batches
    of 4 sequences of 32 tokens from the text file ``corpus``, the ``tiny_tokenizer`` saved in ``tokenizer_dir``."""
    values = dict(task=PRETRAINING.name, total_steps=8, batch_size=4, max_seq_length=32, warmup_steps=2,
                  learning_rate=1e-3, eval_every=0, eval_batches=1, checkpoint_every=0, seed=3,
                  device=str(device), precision="auto")
    values.update(training)
    return JobSpec(TrainingConfig(**values), preset="tiny", model_overrides=dict(TINY_MODEL), corpus=str(corpus),
                   tokenizer=str(tokenizer_dir), run_dir=None if run_dir is None else str(run_dir))
