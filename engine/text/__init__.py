"""Text: the WordPiece tokenizer and its explanation of a text, corpus reading and splitting."""
