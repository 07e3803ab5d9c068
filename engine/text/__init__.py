"""Text: the tokenizer (BERT's WordPiece or any ``tokenizer.json``, special tokens by role, pieces shown readably)
and its explanation of a text, sentence splitting, documents (uploads, given text, the held-out split) and the
built-in corpus."""
