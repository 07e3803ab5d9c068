"""One pretraining step on both sides, for ``bench/train_throughput.py``: our ``BertWithHeads`` and
``transformers.BertForPreTraining`` with the same weights, the same batch and the same optimizer settings, and
the dense-equivalent FLOP count of a step. The step and what is compared are described in that script's docstring.
"""
from __future__ import annotations

import torch

from engine import BertWithHeads
from engine.model.config import BertConfig
from engine.data.masking import mask_tokens

CLS_ID, SEP_ID, MASK_ID, FIRST_WORD_ID = 2, 3, 4, 5
LEARNING_RATE, WEIGHT_DECAY = 1e-4, 0.01


def dense_step_flops(config: BertConfig, batch: int, seq_len: int) -> float:
    """3 x the dense model's forward FLOPs (see the module docstring)."""
    h, i, v, layers = config.hidden_size, config.intermediate_size, config.vocab_size, config.num_hidden_layers
    tokens = batch * seq_len
    per_layer = 2 * tokens * (4 * h * h + 2 * h * i) + 2 * 2 * batch * seq_len * seq_len * h
    mlm_head = 2 * tokens * (h * h + h * v)
    pooler_nsp = 2 * batch * (h * h + 2 * h)
    return 3.0 * (layers * per_layer + mlm_head + pooler_nsp)


def reference_model(ours: BertWithHeads):
    """transformers.BertForPreTraining (default SDPA attention) holding our weights."""
    import transformers

    hf_config = transformers.BertConfig(**{k: v for k, v in ours.config.to_dict().items()
                                           if k not in ("architectures", "model_type")})
    theirs = transformers.BertForPreTraining(hf_config)
    state = dict(ours.state_dict())
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]  # tied to .bias in HF
    missing, unexpected = theirs.load_state_dict(state, strict=False)
    assert not [k for k in missing if "position_ids" not in k and "token_type_ids" not in k], missing
    assert not [k for k in unexpected if k != "cls.predictions.bias"], unexpected
    ours_params = dict(ours.named_parameters(remove_duplicate=False))
    for name, param in theirs.named_parameters(remove_duplicate=False):
        key = "cls.predictions.bias" if name == "cls.predictions.decoder.bias" else name
        assert torch.equal(param, ours_params[key]), f"weight {name} differs after copying"
    assert theirs.cls.predictions.decoder.weight is theirs.bert.embeddings.word_embeddings.weight
    return theirs


def make_batch(config: BertConfig, batch: int, seq_len: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random [CLS] A [SEP] B [SEP] ids, no padding, 15% masked by ``mask_tokens``, random NSP labels."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(FIRST_WORD_ID, config.vocab_size, (batch, seq_len), generator=gen)  # (B, S)
    split = seq_len // 2
    ids[:, 0] = CLS_ID
    ids[:, split] = SEP_ID
    ids[:, -1] = SEP_ID
    special = (ids == CLS_ID) | (ids == SEP_ID)                                              # (B, S)
    types = torch.zeros_like(ids)
    types[:, split + 1:] = 1
    masked, labels = mask_tokens(ids, special.long(), config.vocab_size, MASK_ID, 0.15, generator=gen)
    return {"input_ids": masked, "attention_mask": torch.ones_like(ids), "token_type_ids": types,
            "labels": labels, "next_sentence_label": torch.randint(0, 2, (batch,), generator=gen)}


def make_optimizer(model: torch.nn.Module, fused: bool = False) -> torch.optim.AdamW:
    """AdamW, no weight decay on biases and LayerNorm (the trainer's recipe); ``fused``: the fused kernel."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():  # tied decoder weight listed once
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(param)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                              {"params": no_decay, "weight_decay": 0.0}], lr=LEARNING_RATE,
                             fused=True if fused else None)


def forward_ours(model: BertWithHeads, batch: dict[str, torch.Tensor]):
    return model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"],
                 next_sentence_label=batch["next_sentence_label"], sparse_mlm=True)


def forward_theirs(model, batch: dict[str, torch.Tensor]):
    return model(**batch)


def loss_difference(ours: BertWithHeads, theirs, batch: dict[str, torch.Tensor]) -> float:
    """Max |difference| of total, MLM and NSP loss, both models in eval mode (no dropout)."""
    ours.eval()
    theirs.eval()
    with torch.no_grad():
        a = forward_ours(ours, batch)
        b = forward_theirs(theirs, batch)
        logits = b.prediction_logits.view(-1, b.prediction_logits.size(-1))
        mlm = torch.nn.functional.cross_entropy(logits, batch["labels"].view(-1))
        nsp = torch.nn.functional.cross_entropy(b.seq_relationship_logits, batch["next_sentence_label"])
        diff = max(abs(a.loss.item() - b.loss.item()), abs(a.mlm.loss.item() - mlm.item()),
                   abs(a.nsp.loss.item() - nsp.item()))
    ours.train()
    theirs.train()
    return diff


def train_step_fn(model, forward, batch, device: str = "cpu", precision: str = "fp32"):
    """A closure doing one full step: forward (MLM+NSP; bf16: under autocast), backward, AdamW step, zero_grad."""
    kind = torch.device(device).type
    optimizer = make_optimizer(model, fused=kind == "cuda")

    def step() -> float:
        with torch.autocast(device_type=kind, dtype=torch.bfloat16, enabled=precision == "bf16"):  # fp32: a no-op
            loss = forward(model, batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step
