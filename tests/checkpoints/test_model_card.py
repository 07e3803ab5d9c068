"""The model card's metadata is valid YAML that the Hub reads, and its text says what is known."""
from __future__ import annotations

import yaml

from engine.checkpoints.model_card import CardFacts, model_card


def facts(**changes) -> CardFacts:
    values = dict(name="run-b step-000040", architectures=["BertForPreTraining"],
                  model_config={"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                                "vocab_size": 30522},
                  data="Text given by the user (corpus.txt).", documents=12,
                  tokenizer="The vocabulary is bert-base-uncased's WordPiece vocabulary, kept unchanged.",
                  step=40, total_steps=100, training={"batch_size": 8, "nsp": False},
                  metrics={"step": 40, "mlm_loss": 4.56789, "mlm_acc": 0.123456})
    values.update(changes)
    return CardFacts(**values)


def split(card: str) -> tuple[dict, str]:
    assert card.startswith("---\n")
    _, front, body = card.split("---", 2)
    return yaml.safe_load(front), body


def test_a_stopped_run_without_evaluation():
    meta, body = split(model_card(facts()))
    assert meta == {"library_name": "transformers", "pipeline_tag": "fill-mask", "language": ["en"],
                    "tags": ["bert", "fill-mask", "masked-language-modeling", "bert-explorer"]}
    assert "# run-b step-000040" in body and "2 layers, hidden size 64, 2 attention heads" in body
    assert "40 of 100 steps (a checkpoint taken before the run's last step)" in body
    assert "12 documents" in body and "bert-base-uncased" in body
    assert "MLM loss 4.57, MLM accuracy 12.3%." in body and "NSP" not in body.split("## Results")[1]
    assert "No held-out evaluation was run" in body


def test_a_model_continued_from_the_hub_names_its_base_model_and_eval_table():
    evaluations = [{"step": s, "eval_mlm_loss": 5.0 - s / 100, "eval_mlm_acc": s / 1000} for s in range(10, 210, 10)]
    meta, body = split(model_card(facts(base_model="google/bert_uncased_L-2_H-128_A-2", evaluations=evaluations,
                                        training={"nsp": True}, step=200, total_steps=200)))
    assert meta["base_model"] == "google/bert_uncased_L-2_H-128_A-2" and "next-sentence-prediction" in meta["tags"]
    assert "continued training from `google/bert_uncased_L-2_H-128_A-2`" in body
    rows = [line for line in body.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 12 and rows[-1] == "| 200 | 3 | 20% |"          # the last 12 evaluations
    assert "before the run's last step" not in body


def test_another_familys_card_names_it_and_writes_its_example_with_its_own_mask():
    meta, body = split(model_card(facts(architectures=["RobertaForMaskedLM"], mask_token="<mask>",
                                        model_config={"model_type": "roberta", "vocab_size": 50265})))
    assert meta["tags"][0] == "roberta" and "A small RoBERTa" in body
    assert 'print(fill("the king is <mask> ."))' in body and "[MASK]" not in body
    meta, body = split(model_card(facts(model_config={"model_type": "not-a-family"})))
    assert meta["tags"][0] == "bert" and "A small BERT" in body and "[MASK]" in body   # unknown: BERT's, no crash
