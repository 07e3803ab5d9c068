"""Which input tokens pushed a prediction up or down: captum's integrated gradients and gradient × input on the word
embeddings (``methods``), over what each head's score is and which class it explains (``targets``)."""
