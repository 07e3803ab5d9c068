"""Tokenization over the Hugging Face `tokenizers` library: BERT's WordPiece, and any ``tokenizer.json``.

`WordPieceTokenizer` wraps a ``tokenizers.Tokenizer``. A WordPiece one is set up exactly like
BERT's (BertNormalizer, BertPreTokenizer, WordPiece model, ``[CLS] A [SEP] B [SEP]`` post-processor,
WordPiece decoder); any other model kind (byte-level BPE as RoBERTa's, Unigram as XLM-R's or ALBERT's)
keeps its file's own normalizer, pre-tokenizer, decoder and post-processor. Special tokens are found by
role (``special_roles``). It trains, loads and saves Hugging Face compatible files, encodes into
plain-list `Encoding`s (a pair also into overlapping windows, which ``qa_windows`` lays out as the QA
pipeline's), and `explain()`s one input for the Tokenize tab (see `token_explain`).
Nothing here hand-writes a tokenization algorithm.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Callable, Iterable, Mapping

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from engine.checks import require_int
from engine.regular_files import read_text
from engine.text.encoding import Encoding
from engine.text.piece_display import display_piece, is_byte_level
from engine.text.special_roles import (
    BERT_TOKENS, ROLES, configured_tokens, layout_template, read_tokenizer_config, resolve_roles,
)
from engine.text.token_explain import Explanation, describe
from engine.text.vocabulary import (
    MAX_INPUT_CHARS_PER_WORD, MAX_VOCAB_BYTES, SPECIAL_TOKENS, bert_normalizer, check_text, install_bert_layout,
    lowercases, read_vocab_txt, train_vocabulary,
)

MODEL_MAX_LENGTH = 512
_TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")


class WordPieceTokenizer:
    """A tokenizer (``tokenizers.Tokenizer`` inside), HF-file compatible: BERT's WordPiece or any tokenizer.json."""

    def __init__(self, backend: Tokenizer, lowercase: bool | None = None,
                 special_tokens: Mapping[str, str | None] | None = None) -> None:
        """Adopt ``backend`` (a ``tokenizers.Tokenizer``; modified in place).

        ``special_tokens`` maps roles (``special_roles.ROLES``) to tokens, as a folder's
        ``tokenizer_config.json`` names them; other roles come from the post-processor, else BERT's names.
        A WordPiece backend needs the five BERT roles and always gets the BERT post-processor (a missing
        normalizer, pre-tokenizer or decoder gets BERT's); any other model keeps its file's pipeline, and
        the role tokens it lacks are None. Padding and truncation are switched off on the backend.
        """
        if not isinstance(backend, Tokenizer):
            raise TypeError(f"backend must be a tokenizers.Tokenizer, got {type(backend).__name__}")
        described = json.loads(backend.to_str())
        self.is_wordpiece: bool = isinstance(backend.model, models.WordPiece)
        vocab = backend.get_vocab(with_added_tokens=True)
        configured = dict(special_tokens or {})
        roles = resolve_roles(configured, None if self.is_wordpiece else described.get("post_processor"), vocab)
        if self.is_wordpiece:
            roles.update({r: configured.get(r) or BERT_TOKENS[r] for r in BERT_TOKENS})
            install_bert_layout(backend, roles, lowercase)
            if lowercase is None:
                described = json.loads(backend.to_str())
        else:   # the named tokens become special, as transformers makes them (their own flags where already added)
            added = {str(t) for t in backend.get_added_tokens_decoder().values()}
            backend.add_special_tokens([AddedToken(t, special=True) for t in dict.fromkeys(roles.values())
                                        if t is not None and t not in added])
        backend.no_truncation()
        backend.no_padding()
        self._backend = backend
        self.lowercase: bool = bool(lowercase) if lowercase is not None and self.is_wordpiece else lowercases(described)
        self.byte_level: bool = is_byte_level(described)
        self.roles: dict[str, str | None] = roles
        ids = {role: None if token is None else backend.token_to_id(token) for role, token in roles.items()}
        self.cls_token: str | None = roles["cls"]
        self.sep_token: str | None = roles["sep"]
        self.mask_token: str | None = roles["mask"]
        self.pad_token: str | None = roles["pad"]
        self.unk_token: str | None = roles["unk"]
        self.pad_token_id: int | None = ids["pad"]
        self.unk_token_id: int | None = ids["unk"]
        self.cls_token_id: int | None = ids["cls"]
        self.sep_token_id: int | None = ids["sep"]
        self.mask_token_id: int | None = ids["mask"]
        self._role_ids = ids
        self._templates = {pair: layout_template(backend, pair) for pair in (False, True)}
        self._added: frozenset[str] | None = None
        self._trunc_backend: Tokenizer | None = None   # clone with truncation on, used under _lock
        self._lock = threading.Lock()

    @property
    def backend(self) -> Tokenizer:
        """The underlying ``tokenizers.Tokenizer`` (no truncation, no padding)."""
        return self._backend

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    # --- construction ---
    @classmethod
    def from_vocab(cls, vocab: str | Path | dict[str, int], lowercase: bool = True) -> "WordPieceTokenizer":
        """From a ``vocab.txt`` path or a token->id dict (BERT normaliser/pre-tokenizer/post-processor)."""
        if isinstance(vocab, (str, Path)):
            path = Path(vocab)
            if not path.is_file():
                raise FileNotFoundError(f"vocabulary file not found: {path}")
            vocab = read_vocab_txt(path)
        if not isinstance(vocab, dict):
            raise TypeError(f"vocab must be a path or a dict, got {type(vocab).__name__}")
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ValueError(f"vocabulary lacks the special token(s) {', '.join(missing)}")
        backend = Tokenizer(models.WordPiece(dict(vocab), unk_token="[UNK]",
                                             max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
        backend.normalizer = bert_normalizer(lowercase)
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix="##")
        return cls(backend, lowercase=lowercase)

    @classmethod
    def from_file(cls, path: str | Path) -> "WordPieceTokenizer":
        """From ``tokenizer.json``, ``vocab.txt``, or a directory holding either (tokenizer.json preferred)."""
        path = Path(path)
        if path.is_dir():
            for name in ("tokenizer.json", "vocab.txt"):
                if (path / name).is_file():
                    return cls.from_file(path / name)
            raise FileNotFoundError(f"no tokenizer.json or vocab.txt in {path}")
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer file not found: {path}")
        if path.suffix == ".json":
            text = read_text(path, MAX_VOCAB_BYTES)        # a regular file, size-capped, never blocking
            try:
                backend = Tokenizer.from_str(text)
            except Exception as exc:  # the Rust side raises plain Exception
                raise ValueError(f"{path} is not a valid tokenizer.json: {exc}") from None
            config = read_tokenizer_config(path.parent)    # special tokens by role, from the files beside it
            return cls(backend, special_tokens=configured_tokens(config, f"{path.parent / 'tokenizer_config.json'}"))
        lowercase = bool(read_tokenizer_config(path.parent).get("do_lower_case", True))
        return cls.from_vocab(path, lowercase=lowercase)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2, lowercase: bool = True,
              progress: Callable[[float, str], None] | None = None, length: int | None = None,
              limit_alphabet: int | None = 1000) -> "WordPieceTokenizer":
        """A WordPiece vocabulary trained on ``texts`` (``engine.text.vocabulary.train_vocabulary``: the BERT
        special tokens first, ids in one fixed order, ``progress(fraction, message)`` a handful of times)."""
        vocab = train_vocabulary(texts, vocab_size, min_frequency, lowercase, progress, length, limit_alphabet)
        tokenizer = cls.from_vocab(vocab, lowercase=lowercase)
        (progress or (lambda fraction, message: None))(1.0, f"trained a vocabulary of {tokenizer.vocab_size:,} tokens")
        return tokenizer

    def save(self, directory: str | Path) -> list[Path]:
        """Write ``vocab.txt``, ``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``
        (no ``vocab.txt`` for a non-WordPiece tokenizer, whose config names the generic fast tokenizer class)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        specials = {f"{role}_token": self.roles[role] for role in (BERT_TOKENS if self.is_wordpiece else ROLES)
                    if self.roles[role] is not None}
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": MODEL_MAX_LENGTH,
                  "clean_up_tokenization_spaces": False, **specials}
        names = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
        if self.is_wordpiece:
            by_id = sorted(self.get_vocab().items(), key=lambda kv: kv[1])
            if [i for _, i in by_id] != list(range(len(by_id))):
                raise ValueError("vocabulary ids are not contiguous from 0; cannot write vocab.txt")
            config = {"do_lower_case": self.lowercase, "tokenize_chinese_chars": True, "strip_accents": None,
                      **config, "tokenizer_class": "BertTokenizer"}
            names.insert(0, "vocab.txt")
            (directory / "vocab.txt").write_text("".join(f"{tok}\n" for tok, _ in by_id), encoding="utf-8")
        self._backend.save(str(directory / "tokenizer.json"))
        (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        (directory / "special_tokens_map.json").write_text(json.dumps(specials, indent=2) + "\n", encoding="utf-8")
        return [directory / name for name in names]

    # --- vocabulary ---
    def get_vocab(self) -> dict[str, int]:
        """Token -> id for the whole vocabulary."""
        return self._backend.get_vocab(with_added_tokens=True)

    def id_to_token(self, token_id: int) -> str:
        """The token for ``token_id``; IndexError if out of range."""
        token = self._backend.id_to_token(int(token_id)) if 0 <= int(token_id) else None
        if token is None:
            raise IndexError(f"token id {token_id} is outside the vocabulary (size {self.vocab_size})")
        return token

    def token_to_id(self, token: str) -> int | None:
        """The id of ``token``, or None if it is not in the vocabulary."""
        return self._backend.token_to_id(token)

    def special_ids(self) -> set[int]:
        """Ids of the role tokens this tokenizer has (BERT: [PAD], [UNK], [CLS], [SEP], [MASK])."""
        return {i for i in self._role_ids.values() if i is not None}

    def require_token_id(self, role: str) -> int:
        """The id of the token for ``role`` (``special_roles.ROLES``); ValueError in one sentence if it has none."""
        if role not in ROLES:
            raise ValueError(f"unknown special-token role {role!r}; the roles are {', '.join(ROLES)}")
        token_id = self._role_ids[role]
        if token_id is None:
            raise ValueError(f"this tokenizer has no {role} token (its files name none in its vocabulary), "
                             f"so it cannot do what needs one")
        return token_id

    def display_piece(self, piece: str) -> str:
        """``piece`` as shown to a reader (``piece_display.display_piece``): byte-level pieces decoded, a
        word start shown as ``▁``; special and added tokens, WordPiece and SentencePiece pieces as they are."""
        if not self.byte_level or piece in self._added_tokens():
            return piece
        return display_piece(piece, byte_level=True)

    def _added_tokens(self) -> frozenset[str]:
        if self._added is None:
            self._added = frozenset(str(t) for t in self._backend.get_added_tokens_decoder().values())
        return self._added

    def num_special_tokens(self, pair: bool) -> int:
        """How many special tokens the post-processor's template adds to a single text or a pair (BERT 3 a pair)."""
        processor = self._backend.post_processor
        return 0 if processor is None else processor.num_special_tokens_to_add(pair)

    # --- encoding ---
    def _check_args(self, text: str, text_pair: str | None, max_length: int, truncation: bool) -> None:
        check_text(text, "text")
        if text_pair is not None:
            check_text(text_pair, "text_pair")
        text_pair = text_pair or None
        require_int(max_length, "max_length")
        minimum = self.num_special_tokens(text_pair is not None) + 1
        if truncation and max_length < minimum:
            raise ValueError(f"max_length={max_length} is too small: need >= {minimum} for "
                             f"{'a text pair' if text_pair is not None else 'a single text'} "
                             f"({minimum - 1} special tokens + 1)")

    def _truncate(self, inputs: list, max_length: int, strategy: str) -> list:
        """Encode ``inputs`` with the library's truncation, on a private clone, under a lock."""
        with self._lock:
            if self._trunc_backend is None:
                self._trunc_backend = Tokenizer.from_str(self._backend.to_str())
            self._trunc_backend.enable_truncation(max_length, strategy=strategy)
            try:
                return self._trunc_backend.encode_batch(inputs)
            except Exception as exc:
                raise ValueError(f"cannot truncate to max_length={max_length} with {strategy}: {exc}") from None

    def _encode_many(self, pairs: list[tuple[str, str | None]], max_length: int, truncation: bool,
                     strategy: str) -> list[tuple[Encoding, object]]:
        """(our Encoding, the untruncated backend encoding) per (text, pair)."""
        if strategy not in _TRUNCATION_STRATEGIES:
            raise ValueError(f"truncation strategy must be one of {_TRUNCATION_STRATEGIES}, got {strategy!r}")
        for text, pair in pairs:
            self._check_args(text, pair, max_length, truncation)
        pairs = [(text, pair or None) for text, pair in pairs]   # "" pair = no pair, as in transformers
        inputs = [text if pair is None else (text, pair) for text, pair in pairs]
        full = self._backend.encode_batch(inputs)
        final = list(full)
        groups: dict[str, list[int]] = {}
        for i, (enc, (_, pair)) in enumerate(zip(full, pairs)):
            if truncation and len(enc.ids) > max_length:
                groups.setdefault(strategy if pair is not None else "longest_first", []).append(i)
        for strat, idx in groups.items():
            for i, enc in zip(idx, self._truncate([inputs[i] for i in idx], max_length, strat)):
                final[i] = enc
        return [(self._to_encoding(e, len(f.ids) - len(e.ids)), f) for e, f in zip(final, full)]

    def _tokens(self, e) -> list[str]:
        """``e``'s pieces, an unknown one as the unk token (a Unigram model names it by its source text)."""
        unk = self.unk_token_id
        return [self.unk_token if i == unk else t for t, i in zip(e.tokens, e.ids)] if unk is not None else e.tokens

    def _to_encoding(self, e, dropped: int) -> Encoding:
        tokens = list(self._tokens(e))
        return Encoding(
            input_ids=list(e.ids), token_type_ids=list(e.type_ids), attention_mask=list(e.attention_mask),
            tokens=tokens, offsets=[tuple(o) for o in e.offsets],
            shown=[self.display_piece(t) for t in tokens] if self.byte_level else list(tokens),
            special_tokens_mask=list(e.special_tokens_mask), word_ids=list(e.word_ids),
            sequence_ids=list(e.sequence_ids), truncated=dropped > 0, num_truncated_tokens=dropped,
        )

    def encode(self, text: str, text_pair: str | None = None, max_length: int = 512,
               truncation: bool = True, truncation_side_pair: str = "longest_first") -> Encoding:
        """Encode ``text`` (and ``text_pair``) with specials; truncate to ``max_length`` incl. specials.

        An empty ``text_pair`` counts as no pair (as in ``transformers``).

        ``truncation_side_pair`` is the library's pair strategy: "longest_first",
        "only_first" or "only_second". Raises ValueError if ``max_length`` is too small.
        """
        return self._encode_many([(text, text_pair)], max_length, truncation, truncation_side_pair)[0][0]

    def encode_batch(self, pairs: list[tuple[str, str | None]], max_length: int = 512) -> list[Encoding]:
        """Encode many (text, text_pair or None) at once, unpadded, longest_first truncation."""
        pairs = [(p, None) if isinstance(p, str) else tuple(p) for p in pairs]
        return [enc for enc, _ in self._encode_many(pairs, max_length, True, "longest_first")]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        """Ids back to text (with the file's decoder: ``##`` pieces joined, bytes decoded, ``▁`` a space)."""
        return self._backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def explain(self, text: str, text_pair: str | None = None, max_length: int = 512) -> Explanation:
        """Encode and describe one input for the Tokenize tab (rows, counts, layout, what truncation cut)."""
        (enc, full), = self._encode_many([(text, text_pair)], max_length, True, "longest_first")
        return describe(enc, full, text, text_pair or None, max_length, self.unk_token_id,
                        template=self._templates[bool(text_pair)], display=self.display_piece,
                        continuation_prefix="##" if self.is_wordpiece else None, full_tokens=self._tokens(full))

    def encode_pair_windows(self, text: str, text_pair: str, max_length: int, stride: int) -> list[Encoding]:
        """``text`` and ``text_pair`` with specials, only ``text_pair`` truncated ("only_second") to ``max_length``
        tokens in all, its overflow as further windows that share ``stride`` of its tokens with the one before
        (the library's truncation, on a private clone, under a lock). Each window's ``num_truncated_tokens``
        counts the ``text_pair`` tokens it lacks. The QA pipeline's windows: ``qa_windows.encode_qa_windows``."""
        num_pair = len(self._backend.encode(text_pair, add_special_tokens=False).ids)
        with self._lock:
            if self._trunc_backend is None:
                self._trunc_backend = Tokenizer.from_str(self._backend.to_str())
            self._trunc_backend.enable_truncation(max_length, stride=stride, strategy="only_second")
            try:
                first = self._trunc_backend.encode(text, text_pair)
            finally:
                self._trunc_backend.no_truncation()
        windows = [first, *first.overflowing]
        return [self._to_encoding(w, num_pair - w.sequence_ids.count(1)) for w in windows]
