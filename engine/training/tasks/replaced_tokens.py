"""ELECTRA's replaced-token detection as a pretraining objective (``--objective rtd``): ``ReplacedTokenTask`` and
the model it trains (``discriminator_model``).

One step, per micro-batch of masked-LM data (``PretrainingDataset``, masks as the masked LM's):

1. the generator (``engine.model.electra_generator``: a small masked LM on the discriminator's own embeddings)
   reads the masked input and predicts the original token at every masked position: its MLM loss;
2. a token is sampled from its softmax at each masked position (Gumbel-max; no gradient flows through the sample)
   and put in place of the mask, every other position keeping its original token;
3. the discriminator (the ELECTRA encoder and its replaced-token head, ``family_heads.REPLACED_TOKENS``) reads that
   text and tells for every real token whether it was replaced. The label is 1 exactly where the token now differs
   from the original: a position where the generator sampled the original token is labelled original, and the
   special tokens and padding never are replaced; the loss is the binary cross-entropy over the real tokens.

The loss is ``generator MLM + rtd_weight * discriminator`` (ELECTRA's λ = 50), each term a mean over its own targets
(masked tokens, real tokens), so accumulated micro-batches add up as the other objectives' do. Metrics: ``rtd_loss``
and ``rtd_acc`` (the discriminator's, per real token), ``generator_mlm_loss`` and, so that the curves keep their
keys, ``mlm_loss`` / ``mlm_acc`` (the generator's); ``nsp_*`` are None (no pairs). Training samples draw on the
global RNG, which a checkpoint keeps (a resume is exact); a held-out evaluation draws from its own seeded generator,
so it gives the same numbers at every call and leaves the training's draws alone.

The model is an ELECTRA discriminator (``model_type`` electra, no pooler) carrying the generator as a head; the
checkpoints are the discriminator (``ElectraForPreTraining``, which the Heads tab's *Replaced tokens* view reads)
with the generator's weights beside it. One process only: the generator runs outside the discriminator's forward
pass, which DistributedDataParallel would not see.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from engine.data.masking import IGNORE_INDEX
from engine.data.pretraining import Batch, PretrainingDataset
from engine.training.tasks.start_model import dropout_overrides, fresh_model_config
from engine.model.electra_generator import GENERATOR_OPTION
from engine.model.encoder import BertModel
from engine.model.family_heads import ReplacedTokenOutput
from engine.model.families.registry import family_of
from engine.model.heads import BertWithHeads, head_specs_for
from engine.model.loaded_model import LoadedModel
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop import distributed as dist
from engine.training.loop.config import TrainingConfig
from engine.training.loop.training_task import TrainingTask
from engine.training.tasks.pretraining_checks import check_pretraining_data
from engine.training.tasks.pretraining_settings import TASK, PretrainingSettings, objective_of

HEADS = ("replaced_tokens", "generator")
EVAL_SAMPLING_SEED = 0          # a held-out evaluation's samples: the same at every call


@dataclass
class ReplacedTokenStep:
    """One micro-batch's generator and discriminator passes."""

    generator_logits: torch.Tensor        # (N, V) at the N masked positions
    generator_targets: torch.Tensor       # (N,) the original tokens there
    generator_loss: torch.Tensor          # mean cross-entropy over the N (0, attached, when N is 0)
    corrupted_ids: torch.Tensor           # (B, S) the text the discriminator read
    replaced: torch.Tensor                # (B, S) 1 where that text differs from the original
    discriminator: ReplacedTokenOutput    # logits (B, S), binary cross-entropy over the real tokens


def replaced_labels(original: torch.Tensor, corrupted: torch.Tensor, attention_mask: torch.Tensor,
                    special_tokens_mask: torch.Tensor) -> torch.Tensor:
    """(B, S) long: 1 where ``corrupted`` differs from ``original`` at a real, non-special token; 0 elsewhere."""
    ordinary = (attention_mask == 1) & (special_tokens_mask == 0)                          # (B, S)
    return ((corrupted != original) & ordinary).long()


def sample_tokens(logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """(N,) a token drawn from softmax(``logits``) (N, V) per row, by the Gumbel-max trick; no gradient."""
    with torch.no_grad():
        uniform = torch.rand(logits.shape, generator=generator, device=logits.device).clamp_(1e-20, 1.0)   # (N, V)
        return (logits.detach().float() - torch.log(-torch.log(uniform))).argmax(-1)                       # (N,)


class ReplacedTokenTask(TrainingTask):
    """Generator MLM loss per masked token, discriminator loss (weighted by ``rtd_weight``) per real token."""

    name, terms = TASK, 2
    stat_names = ("mlm_loss_sum", "mlm_correct", "rtd_loss_sum", "rtd_correct")

    def __init__(self, config: TrainingConfig, settings: PretrainingSettings) -> None:
        self.settings = settings
        self.objective = objective_of(settings)
        self.weight = settings.rtd_weight
        self.nsp = False

    def heads(self, config: TrainingConfig) -> tuple[str, ...]:
        return HEADS

    def check(self, model: BertWithHeads, train_data: PretrainingDataset, eval_data: PretrainingDataset | None,
              config: TrainingConfig) -> None:
        if dist.world_size() > 1:
            raise ValueError("objective rtd (ELECTRA) trains in one process; run it without torchrun")
        if config.nsp:
            raise ValueError("objective rtd (ELECTRA's replaced-token detection) has no pair head: turn "
                             "next-sentence prediction off")
        lacking = [h for h in HEADS if h not in model.heads]
        if lacking or not isinstance(model.bert, BertModel):
            raise ValueError(f"objective rtd trains an ELECTRA discriminator with its generator (heads "
                             f"{' and '.join(HEADS)}); this model ({family_of(model.config.model_type).name}) has "
                             f"{', '.join(model.heads) or 'no heads'}")
        check_pretraining_data(train_data, config, "training", True, self.objective)
        if eval_data is not None:
            check_pretraining_data(eval_data, config, "evaluation", False, self.objective)

    def counts(self, batch: Batch) -> tuple[int, int]:
        return int((batch.labels != IGNORE_INDEX).sum()), int(batch.attention_mask.sum())

    def forward(self, net: torch.nn.Module, batch: Batch, config: TrainingConfig) -> ReplacedTokenStep:
        model = getattr(net, "module", net)
        masked = batch.labels != IGNORE_INDEX                                                  # (B, S)
        embedded = model.bert.embeddings(batch.input_ids, batch.token_type_ids)               # (B, S, E) shared
        logits = model.head_module("generator")(embedded, batch.attention_mask, masked)       # (N, V)
        targets = batch.labels[masked]                                                         # (N,)
        loss = F.cross_entropy(logits.float(), targets, reduction="sum") / max(1, len(targets))
        sampling = None if model.training else torch.Generator(logits.device).manual_seed(EVAL_SAMPLING_SEED)
        original = torch.where(masked, batch.labels, batch.input_ids)                         # (B, S)
        corrupted = original.masked_scatter(masked, sample_tokens(logits, sampling))           # (B, S)
        replaced = replaced_labels(original, corrupted, batch.attention_mask, batch.special_tokens_mask)
        out = net(input_ids=corrupted, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                  replaced_labels=replaced, compute=("replaced_tokens",))
        return ReplacedTokenStep(logits, targets, loss, corrupted, replaced, out.result("replaced_tokens"))

    def losses(self, out: ReplacedTokenStep) -> list[torch.Tensor | None]:
        return [out.generator_loss, self.weight * out.discriminator.loss]

    def tally(self, out: ReplacedTokenStep, batch: Batch, counts: Sequence[int]) -> torch.Tensor:
        """(generator loss * n, generator correct, discriminator loss * k, discriminator correct)."""
        n, k = counts
        with torch.no_grad():
            generator_correct = (out.generator_logits.argmax(-1) == out.generator_targets).sum().float()
            real = batch.attention_mask == 1                                                   # (B, S)
            called = (out.discriminator.logits > 0).long()                                     # (B, S)
            rtd_correct = ((called == out.replaced) & real).sum().float()
            return torch.stack((out.generator_loss.detach().float() * n, generator_correct,
                                out.discriminator.loss.detach().float() * k, rtd_correct))

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        masked, tokens = max(1, totals[0]), max(1, totals[1])
        generator = sums[0] / masked
        return {"mlm_loss": generator, "mlm_acc": sums[1] / masked, "nsp_loss": None, "nsp_acc": None,
                "generator_mlm_loss": generator, "rtd_loss": sums[2] / tokens, "rtd_acc": sums[3] / tokens}

    def fingerprint(self, data: PretrainingDataset) -> str:
        return data.fingerprint()


def discriminator_model(spec: Any, config: TrainingConfig, tokenizer: WordPieceTokenizer,
                        loaded: LoadedModel | None) -> BertWithHeads:
    """The model an rtd job trains: an ELECTRA discriminator with its generator head, from the job's preset
    (``model_overrides``: its sizes, ``embedding_size`` for factorised embeddings) or from ``loaded``, an ELECTRA
    (its weights where they fit; heads it lacks start fresh). The generator's size is the settings'."""
    settings = spec.settings
    options = {GENERATOR_OPTION: settings.generator_size}
    dropout = dropout_overrides(spec)
    torch.manual_seed(config.seed)
    if loaded is None:
        model_config = fresh_model_config(spec, config, tokenizer).replace(model_type="electra",
                                                                           family_options=options)
        if model_config.hidden_act != "gelu":
            raise ValueError("objective rtd trains an ELECTRA, whose generator head uses GELU: leave hidden_act "
                             f"at gelu (got {model_config.hidden_act!r})")
        config.check_model(model_config)
        return BertWithHeads(model_config, heads=HEADS)
    if loaded.config.model_type != "electra":
        raise ValueError(f"objective rtd trains an ELECTRA discriminator, and {spec.init_from} is a "
                         f"{family_of(loaded.config.model_type).name} model: start from a preset or an ELECTRA")
    if tokenizer.vocab_size > loaded.config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens but {spec.init_from} only "
                         f"{loaded.config.vocab_size} embeddings; use its own tokenizer")
    config.check_model(loaded.config)
    model_config = loaded.config.replace(**dropout, family_options={**loaded.config.family_options, **options})
    model = BertWithHeads(model_config, heads=tuple(h for h in head_specs_for(model_config)
                                                    if h in HEADS or h in loaded.heads))
    ours = model.state_dict()
    model.load_state_dict({k: v for k, v in loaded.model.state_dict().items()
                           if k in ours and ours[k].shape == v.shape}, strict=False)
    return model
