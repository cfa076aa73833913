"""The MiniLM embedder on onnxruntime, and its clear error when a package is missing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from thoth_episodic import embedder as embedder_module
from thoth_episodic.embedder import EmbedderUnavailable, MiniLMEmbedder, minilm, model_files


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
    assert ((together * one_by_one).sum(axis=1) > 0.95).all()  # a batch shifts vectors a little, an order swap a lot


def test_by_default_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it():
    texts = ["short", "a much longer sentence about the weather in Lisbon during the spring", "x"]
    default = minilm(None, {})
    assert np.array_equal(default.embed(texts), np.concatenate([default.embed([t]) for t in texts]))


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
    assert ((vectors * np.concatenate([small.embed([t]) for t in texts])).sum(axis=1) > 0.95).all()


def test_the_model_and_the_tokenizer_ship_in_this_package():
    model, tokenizer = model_files()
    assert (model.name, tokenizer.name) == ("model.onnx", "tokenizer.json")
    assert model.parent.parent.name == tokenizer.parent.parent.name == "thoth_episodic"  # shipped
    assert minilm(None, {}) is minilm(None, {})


def test_a_missing_model_file_is_named_with_how_to_reinstall(monkeypatch, tmp_path):
    monkeypatch.setattr(embedder_module, "MODEL_FILE", tmp_path / "model.onnx")
    with pytest.raises(EmbedderUnavailable, match="model.onnx is missing; reinstall thoth-episodic"):
        model_files()


def test_the_shipped_model_multiplies_int8_weights(tmp_path):
    """`scripts/minilm-int8` made it: int8 MatMuls, not float32 weights folded from int8 at load (3.7 ms a query)."""
    import json

    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "run")
    session = ort.InferenceSession(str(model_files()[0]), options, providers=["CPUExecutionProvider"])
    ids = np.array([[101, 7592, 102]], dtype=np.int64)
    session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})
    events = json.loads(Path(session.end_profiling()).read_text())
    ops = {event["args"]["op_name"] for event in events if event.get("cat") == "Node"}
    assert {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"} <= ops  # MatMul is left for attention only
