"""What a model knows about syntax: heads that follow dependencies, layers that hold parts of speech, and both
over a run's checkpoints (Clark et al. 2019; Hewitt & Liang 2019). The rules: docs/design/syntax-probes.md.

``conllu`` reads Universal Dependencies files, ``features`` runs the model once per sentence batch and keeps
word-level attention and word vectors, ``heads`` scores each attention head against the dependencies and a
fixed-offset baseline, ``layer_probe`` fits the UPOS probe and its control task per layer, ``over_training``
takes the same measures over checkpoints (cached per checkpoint file).
"""
