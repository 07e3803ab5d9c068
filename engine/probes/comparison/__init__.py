"""Two models on one input (``compare``): their layers by CKA, their attention and their fill-mask guesses, by tokens
or, when their tokenizers differ, by words: the two tokenizations lined up by words (``word_alignment``) and the
guesses compared by the words they write (``word_fillers``). Linear CKA, plain and debiased (``cka``), and over a
sentence set rather than one input's handful of tokens (``sentence_set``)."""
