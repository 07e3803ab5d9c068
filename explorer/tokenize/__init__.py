"""The Tokenize tab: WordPiece pieces, ids, segments and offsets."""
