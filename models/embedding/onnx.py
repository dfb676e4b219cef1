"""The ONNX Runtime embedder: the same model as sentence-transformers, without PyTorch's
per-call overhead (``embedding.backend = "onnx"``, the default).

It runs the graph :mod:`orchmem.models.embedding.onnx_export` exported from the packaged
weights, with the model's own fast tokenizer (``tokenizer.json``), mean pooling in the
graph and L2 normalization here. Its vectors equal sentence-transformers' to float
noise (about 1e-7 per component; the export is checked against PyTorch when it is
made), so it carries the same ``version`` string and vectors written by either
backend stay comparable: switching backends re-embeds nothing.

Why it is faster at batch size 1 (a query): no module walk or ``eval()`` per call,
no autograd bookkeeping, fused attention kernels, and a thread pool that sleeps
instead of spinning when idle (``session.intra_op.allow_spinning = 0``), so a recall
does not fight a worker's embedding for the same two cores.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from orchmem.config import EmbeddingError
from orchmem.config.settings import EmbeddingSettings
from orchmem.models.embedding.embedders import Embedder, model_label, resolve_model_path
from orchmem.models.embedding.onnx_export import cached_export, default_cache_dir

logger = logging.getLogger(__name__)

#: sentence-transformers' default when the model does not say (``max_seq_length``).
DEFAULT_MAX_TOKENS = 256


class OnnxEmbedder(Embedder):
    """A sentence-transformers model (mean pooling) run by ONNX Runtime on the CPU."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        self.settings = settings
        self.path = resolve_model_path(settings.model)
        label = model_label(settings.model, self.path)
        cache_dir = settings.cache_dir or default_cache_dir(self.path)
        export = cached_export(self.path, label, Path(cache_dir).expanduser())
        #: The verified graph this embedder runs.
        self.export = export
        try:
            import onnxruntime

            self._tokenizer = load_tokenizer(self.path)
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = settings.onnx_threads
            options.inter_op_num_threads = 1
            # Idle threads sleep: spinning ones would take the cores a worker or the
            # vector product needs next (measured on 2 cores: docs/performance.md#threads).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            self._session = onnxruntime.InferenceSession(
                str(export.path), options, providers=["CPUExecutionProvider"])
            self.dim = int(self._session.get_outputs()[0].shape[1])
        except Exception as exc:  # a missing runtime, an unreadable graph or tokenizer
            raise EmbeddingError(f"cannot start the onnx embedder for {settings.model!r} "
                                 f"from {export.path}: {exc}") from exc
        self._normalize = settings.normalize or _has_normalize(self.path)
        norm = "norm" if settings.normalize else "raw"
        self.version = f"{label}:{self.dim}:{norm}"
        logger.info("loaded embedding model %s (onnx, %s)", self.version, export.path)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            if len(texts) == 1:
                vectors = self._run([self._tokenizer.encode(texts[0])])
            else:
                vectors = self._encode_batches(list(texts))
        except Exception as exc:
            raise EmbeddingError(f"embedding {len(texts)} texts failed: {exc}") from exc
        return vectors

    def _encode_batches(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        # Longest first, as sentence-transformers does: each batch pads to less.
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        size = self.settings.batch_size
        for start in range(0, len(order), size):
            chunk = order[start:start + size]
            out[chunk] = self._run([encodings[i] for i in chunk])
        return out

    def _run(self, encodings: list[Any]) -> np.ndarray:
        vectors = self._session.run(None, to_inputs(encodings))[0]
        if self._normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, 1e-12)
        return np.ascontiguousarray(vectors, dtype=np.float32)


def load_tokenizer(model_dir: Path) -> Any:
    """The model's fast tokenizer, truncating as sentence-transformers does (no padding:
    :func:`to_inputs` pads a batch to its longest text)."""
    from tokenizers import Tokenizer

    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise EmbeddingError(f"the onnx backend needs {path} (a fast tokenizer); use "
                             "embedding.backend = 'sentence-transformers' for this model")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(_max_tokens(model_dir))
    return tokenizer


def _max_tokens(model_dir: Path) -> int:
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        value = json.loads(config.read_text("utf-8")).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_MAX_TOKENS


def _has_normalize(model_dir: Path) -> bool:
    """Whether the model's own pipeline ends in a Normalize module (MiniLM's does)."""
    modules = model_dir / "modules.json"
    if not modules.is_file():
        return False
    return any(str(m.get("type", "")).endswith(".Normalize")
               for m in json.loads(modules.read_text("utf-8")))


def to_inputs(encodings: list[Any]) -> dict[str, np.ndarray]:
    """The graph's int64 inputs for tokenized texts, padded with 0 to the longest."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        ids[row, :n] = encoding.ids
        mask[row, :n] = 1
        types[row, :n] = encoding.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
