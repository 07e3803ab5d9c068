"""The model: ``BertConfig``, the encoder (embeddings, attention, layers, pooler), the task heads and their outputs."""
