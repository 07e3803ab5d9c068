"""What a job asks of its start model (``engine.training.tasks.start_model``): QA windows leave room for the special
tokens of the tokenizer's own pair template (RoBERTa's ``<s> A </s></s> B </s>``: 4, as transformers counts them;
BERT's 3), the sequence length fits the positions less RoBERTa's offset, and a head the family lacks is refused in
one sentence."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import transformers

from engine.model.config import BertConfig
from engine.model.families.registry import load_config
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec
from engine.training.tasks.registry import finetuning_tasks
from engine.training.tasks.start_model import check_heads, check_start_model, family_tasks, folder_tokenizer
from support.family_tokenizers import build

ROOT = Path(__file__).resolve().parents[3]
SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)


@pytest.fixture(scope="module")
def roberta(tmp_path_factory) -> Path:
    """A RoBERTa tokenizer folder with a config.json of 66 positions (64 usable after its padding offset)."""
    folder = build("roberta", tmp_path_factory.mktemp("roberta"))
    transformers.RobertaConfig(**SHAPE, vocab_size=600, max_position_embeddings=66).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def albert(tmp_path_factory) -> Path:
    folder = build("albert", tmp_path_factory.mktemp("albert"))
    transformers.AlbertConfig(**SHAPE, embedding_size=16, vocab_size=600).save_pretrained(folder)
    return folder


def qa_job(seq: int, stride: int, question: int) -> tuple[JobSpec, TrainingConfig]:
    config = TrainingConfig(task="qa", max_seq_length=seq, nsp=False)
    return JobSpec(config, data="squad.json", task_settings=dict(doc_stride=stride, max_question_len=question)), config


def test_a_qa_window_counts_the_specials_of_the_tokenizers_pair_template(roberta):
    ours = WordPieceTokenizer.from_file(roberta)
    theirs = transformers.AutoTokenizer.from_pretrained(roberta)
    assert ours.num_special_tokens(pair=True) == theirs.num_special_tokens_to_add(pair=True) == 4
    bert = WordPieceTokenizer.from_file(ROOT / "assets" / "tokenizer")
    assert bert.num_special_tokens(pair=True) == 3
    spec, config = qa_job(64, 44, 16)                      # 64 - 16 - 3 = 45 > 44, but 64 - 16 - 4 = 44
    check_start_model(spec, config, BertConfig(max_position_embeddings=64), bert, "a BERT")
    with pytest.raises(ValueError, match=r"doc_stride \(44\) must be smaller than the context room of a window: "
                                         r"max_seq_len 64 - max_question_len 16 - 4 special tokens of the "
                                         r"tokenizer's pair template = 44"):
        check_start_model(spec, config, load_config(roberta), ours, "a RoBERTa")
    spec.replace(data=str(ROOT / "assets" / "examples" / "tiny_squad.json")).validate()                 # before the tokenizer is known, it is not refused


def test_the_sequence_length_is_the_positions_less_robertas_offset(roberta):
    model = load_config(roberta)
    assert model.max_tokens == 64
    spec, config = qa_job(64, 16, 16)
    check_start_model(spec, config, model, folder_tokenizer(roberta), "a RoBERTa")
    spec, config = qa_job(65, 16, 16)
    with pytest.raises(ValueError, match=r"max_seq_length \(65\) is longer than the model's 64 positions "
                                         r"\(max_position_embeddings 66 less the 2 its family skips\)"):
        check_start_model(spec, config, model, None, "a RoBERTa")


def test_a_head_the_family_lacks_is_refused_in_one_sentence(roberta, albert):
    """Neither RoBERTa nor ALBERT has next-sentence prediction (ALBERT's sentence-order head is another task), so
    pretraining or ``qa_mlm`` with NSP is refused from them; without NSP their masked-LM training is not."""
    for folder, family in ((roberta, "RoBERTa"), (albert, "ALBERT")):
        model = load_config(folder)
        for task in ("pretraining", "qa_mlm"):
            with pytest.raises(ValueError) as refused:
                check_heads(model, TrainingConfig(task=task, nsp=True), "my-model")
            message = str(refused.value)
            assert message.startswith(f"my-model is a {family} model, and the engine has no next-sentence head for "
                                      f"{family} models yet, so it cannot train task {task};"), message
            assert "next-sentence prediction off" in message and "\n" not in message
            check_heads(model, TrainingConfig(task=task, nsp=False), "my-model")
        assert "qa_mlm" not in family_tasks(model) and {"qa", "token_classification"} <= set(family_tasks(model))


def test_bert_has_every_tasks_heads():
    assert family_tasks(BertConfig()) == list(finetuning_tasks())
    check_heads(BertConfig(), TrainingConfig(task="qa_mlm", nsp=True), "default")


def test_a_folder_without_tokenizer_files_has_none(tmp_path):
    assert folder_tokenizer(tmp_path) is None
