"""bench/syntax_probe.py: the untrained model has the trained one's shape and BERT's initialisation, and the
measures it prints are the engine's on the same sentences."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import tiny_config
from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from engine.probes.syntax.conllu import read_sample
from engine.probes.syntax.features import sentence_features
from engine.probes.syntax.heads import head_scores
from support.bench_helpers import load_bench_script
from support.reference import randomize_

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_bench_measures_what_the_engine_measures(tiny_tokenizer, capsys) -> None:
    bench = load_bench_script("syntax_probe")
    model = randomize_(BertWithHeads(tiny_config(max_position_embeddings=256), heads=("mlm",)), 2, scale=0.3).eval()
    trained = LoadedModel(model, tiny_tokenizer, model.config, "tiny")
    fresh = bench.fresh_model(trained)
    assert fresh.config is trained.config and fresh.tokenizer is trained.tokenizer
    weights = fresh.model.bert.encoder.layer[0].attention.self.query.weight
    assert abs(float(weights.detach().std()) - trained.config.initializer_range) < 0.005     # BERT's N(0, 0.02)
    sentences = read_sample()[:30]
    found = bench.measure(trained, sentences, heads_sentences=20)
    expected = head_scores(sentence_features(trained, sentences))
    assert found["heads"].relations == expected.relations
    np.testing.assert_allclose(found["heads"].accuracy["dependent → head"], expected.accuracy["dependent → head"])
    assert found["heads_few"].num_sentences == 20 and len(found["probe"].layers) == 3
    assert found["reference_s"] > 0 and all(t > 0 for t in found["heads_view"])
    bench.print_heads("tiny", found)
    bench.print_probe("tiny", found)
    printed = capsys.readouterr().out
    assert "| relation | arcs |" in printed and "selectivity peaks at layer" in printed
