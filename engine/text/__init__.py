"""Text: the WordPiece tokenizer and its explanation of a text, sentence splitting, documents (uploads, given
text, the held-out split) and the built-in corpus."""
