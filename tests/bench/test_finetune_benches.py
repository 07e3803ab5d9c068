"""The fine-tuning benches' own parts on tiny inputs: the held-out split of a CoNLL-U file keeps whole
documents apart, the Wikipedia reader makes documents of sentences, and the throughput bench's two
models start equal (same loss on the same batch)."""
from __future__ import annotations

from pathlib import Path

import torch

from bench import finetune_quality as quality
from bench import finetune_throughput as throughput
from conftest import tiny_config
from engine.checkpoints.key_mapping import export_state
from engine.model.head_specs import HEADS
from engine.model.heads import BertWithHeads
from support.reference import hf_config


def test_conllu_split_keeps_whole_documents_apart(tmp_path: Path) -> None:
    docs = [f"# newdoc id = d{i}\n# text = w{i}\n1\tw{i}\tw\tNOUN\t_\t_\t0\troot\t_\t_\n\n" for i in range(8)]
    path = tmp_path / "dev.conllu"
    path.write_text("".join(docs), encoding="utf-8")
    train, held, n_train, n_held = quality.split_conllu_documents(path, held_out=0.25)
    assert (n_train, n_held) == (6, 2) and train == "".join(docs[:6]) and held == "".join(docs[6:])


def test_wikiextractor_files_become_documents_of_sentences(tmp_path: Path) -> None:
    (tmp_path / "AA").mkdir()
    body = ("Title\n\nThe first sentence has enough words in it. The second sentence has enough words too. "
            "Short one. The third sentence has enough words as well. And the fourth sentence is long enough.\n")
    (tmp_path / "AA" / "wiki_00").write_text(f'<doc id="1" url="u" title="Title">\n{body}</doc>\n', encoding="utf-8")
    [document] = quality.wiki_documents(tmp_path, limit=10)
    assert len(document) == 4 and document[0] == "The first sentence has enough words in it."


def test_throughput_models_start_equal() -> None:
    for head, (cls, labels, _, _, choices) in throughput.CASES.items():
        config = tiny_config(max_position_embeddings=64).replace(id2label={i: f"L{i}" for i in range(labels)})
        torch.manual_seed(0)
        ours = BertWithHeads(config, heads=(head,)).eval()
        theirs = cls(hf_config(config, attn_implementation="sdpa")).eval()
        theirs.load_state_dict(export_state(ours.state_dict(), [HEADS[head].hf_class]), strict=True)
        batch = throughput.batch_for(config, head, 4, 16, choices, labels)
        names = {"token_classifier": "token_labels", "classifier": "class_labels", "multiple_choice": "choice_labels"}
        mine = getattr(ours(**{k: v for k, v in batch.items() if k != "labels"}, **{names[head]: batch["labels"]}),
                       head).loss
        assert torch.allclose(mine, theirs(**batch).loss, atol=1e-5), head
