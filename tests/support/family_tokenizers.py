"""Small tokenizer folders of the BERT family's descendants, built offline for parity tests.

Each vocabulary is trained here with the ``tokenizers`` library on a few hundred words written below, then
handed to the ``transformers`` 5.x class of that family (which builds that family's pipeline around it:
normalizer, pre-tokenizer, decoder, post-processor) and saved with ``save_pretrained``: the folders are what
``transformers`` itself writes and reads back. ``generic`` is a ``PreTrainedTokenizerFast`` over a pipeline of
our own (which ``transformers`` keeps as the file has it).
"""
from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("roberta", "xlmr", "albert", "distilbert", "generic")

CORPUS = """
The quick brown fox jumps over the lazy dog while the cat sleeps in the warm afternoon sun.
Tokenization splits running text into pieces; a vocabulary holds the pieces a model embeds.
Paris is the capital and largest city of France, on the river Seine, famous for its museums.
What is the capital of France? Where does the river flow? Who painted the famous portrait?
Researchers trained encoders such as BERT, RoBERTa, ALBERT, ELECTRA and DeBERTa on large corpora.
A café in Zürich served crème brûlée, naïve résumés were read aloud, and Ζεύς smiled over Athens.
Numbers like 3.14159, 2024 and $100 appear with e-mail addresses such as user@example.com often.
The teacher wanted every student to keep reading unbelievable stories about the running robot.
Masked language modelling hides a fraction of the pieces and asks the model to predict them again.
Sentences pair up for the next sentence task; the second segment follows the first one, or not.
She sells sea shells by the sea shore, and the shells she sells are surely sea shells indeed.
Our neighbour was painting the garden fence blue, then red, then green, until the paint ran out.
""".strip().splitlines()


def corpus(repeat: int = 8) -> list[str]:
    """The training lines, repeated so that frequent pairs merge."""
    return [line for _ in range(repeat) for line in CORPUS]


def _unigram(specials: list[str], unk: str, normalizer: normalizers.Normalizer | None) -> list[tuple[str, float]]:
    backend = Tokenizer(models.Unigram())
    if normalizer is not None:
        backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                     pre_tokenizers.Metaspace(replacement="▁")])
    backend.train_from_iterator(corpus(), trainers.UnigramTrainer(vocab_size=400, special_tokens=specials,
                                                                  unk_token=unk, show_progress=False))
    return [tuple(item) for item in json.loads(backend.to_str())["model"]["vocab"]]


def _byte_level_bpe(specials: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.train_from_iterator(corpus(), trainers.BpeTrainer(
        vocab_size=500, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    model = json.loads(backend.to_str())["model"]
    return model["vocab"], [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]


def _generic(folder: Path) -> None:
    """A Unigram with a normalizer no family class builds (NFKC, runs of spaces to one) and a template that
    types the second segment 1; saved as a plain PreTrainedTokenizerFast."""
    import transformers
    vocab = _unigram(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[UNK]", None)
    backend = Tokenizer(models.Unigram(vocab, unk_id=1))
    backend.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, cls_token="[CLS]", sep_token="[SEP]",
                                               pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]")
    tok.save_pretrained(str(folder))


def build(family: str, folder: Path) -> Path:
    """Write the ``family`` tokenizer folder into ``folder`` (created) and return it."""
    import transformers
    folder.mkdir(parents=True, exist_ok=True)
    if family == "roberta":
        vocab, merges = _byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        tok = transformers.RobertaTokenizerFast(vocab=vocab, merges=merges)
    elif family == "xlmr":       # the class's Unigram has unk_id 3: <s> <pad> </s> <unk> <mask> first
        tok = transformers.XLMRobertaTokenizerFast(vocab=_unigram(["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                                                  "<unk>", None))
    elif family == "albert":     # unk_id 1: <pad> <unk> [CLS] [SEP] [MASK] first; lower-cased, accents stripped
        norm = normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()])
        tok = transformers.AlbertTokenizerFast(vocab=_unigram(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"],
                                                              "<unk>", norm))
    elif family == "distilbert":
        lines = (ROOT / "assets" / "tokenizer" / "vocab.txt").read_text(encoding="utf-8").splitlines()
        tok = transformers.DistilBertTokenizerFast(vocab={t: i for i, t in enumerate(lines)})
    elif family == "generic":
        _generic(folder)
        return folder
    else:
        raise ValueError(f"unknown family {family!r}")
    tok.save_pretrained(str(folder))
    return folder
