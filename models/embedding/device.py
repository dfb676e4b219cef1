"""Where bulk embedding runs: ``embedding.device`` resolved against the machine.

Bulk embedding (the worker's batches and write-backs, re-embedding, import, ingest)
encodes many texts per call, which a GPU does an order of magnitude faster than the
CPU. One query is the opposite: a GPU call costs more than ONNX Runtime's on the CPU,
so recall keeps :func:`~orchmem.models.embedding.embedders.get_embedder` (the
configured backend, on the CPU) and only :func:`bulk_embedder` follows the device.

On CUDA the model runs as sentence-transformers (PyTorch) whichever built-in backend
is configured: both built-ins run the same weights and share a ``version``, so vectors
written on the GPU and queries embedded on the CPU stay comparable
(docs/performance.md#gpu-embedding). A plug-in backend (``package.module:attr``)
decides its own device: ``auto`` keeps it as it is and ``cuda`` is refused.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import threading
from typing import Literal

from orchmem.config import ConfigError
from orchmem.config.settings import EmbeddingSettings
from orchmem.models.embedding.embedders import Embedder, SentenceTransformerEmbedder, get_embedder

logger = logging.getLogger(__name__)

Device = Literal["cpu", "cuda"]

#: Backends whose model the GPU path can run (the same weights, the same ``version``).
CUDA_BACKENDS = frozenset({"onnx", "sentence-transformers"})


@functools.cache
def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (False when torch itself is missing); asked once
    per process (bulk embedding asks before every batch)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def choose_device(setting: str, backend: str, cuda: bool) -> Device:
    """The device bulk embedding uses for ``embedding.device = setting``.

    ``cuda`` is whether a GPU is visible. Raises ConfigError, naming the field, when
    ``cuda`` is asked for and there is no GPU or the backend cannot use it.
    """
    if setting == "cpu":
        return "cpu"
    supported = backend in CUDA_BACKENDS
    if setting == "auto":
        return "cuda" if cuda and supported else "cpu"
    if setting != "cuda":
        raise ConfigError(f"embedding.device must be 'auto', 'cpu' or 'cuda', not {setting!r}")
    if not supported:
        raise ConfigError(f"embedding.device = 'cuda' needs a built-in embedding.backend "
                          f"('onnx' or 'sentence-transformers'), not {backend!r}")
    if not cuda:
        raise ConfigError("embedding.device = 'cuda' but torch sees no CUDA GPU on this "
                          "machine; set embedding.device to 'auto' or 'cpu'")
    return "cuda"


def device_for(settings: EmbeddingSettings) -> Device:
    """:func:`choose_device` for ``settings`` on this machine. Raises ConfigError.

    torch is imported only when the setting is not ``cpu`` and the backend could use a
    GPU: a CPU-only setup does not pay for it."""
    if settings.device == "cpu" or (settings.device == "auto"
                                    and settings.backend not in CUDA_BACKENDS):
        return "cpu"
    return choose_device(settings.device, settings.backend, cuda_available())


def check_device(settings: EmbeddingSettings) -> None:
    """Raise ConfigError, naming the field, when ``embedding.device = "cuda"`` cannot be
    had. Asked in a child interpreter: a process that forks workers must not start CUDA
    before the fork. ``auto`` and ``cpu`` never fail, so nothing is asked for them."""
    if settings.device != "cuda":
        return
    probe = subprocess.run(
        [sys.executable, "-c", "import torch; print(int(torch.cuda.is_available()))"],
        capture_output=True, text=True, timeout=300, check=False)
    cuda = probe.returncode == 0 and probe.stdout.strip() == "1"
    choose_device(settings.device, settings.backend, cuda)


_gpu: dict[tuple[object, ...], Embedder] = {}
_gpu_lock = threading.Lock()


def bulk_embedder(settings: EmbeddingSettings) -> Embedder:
    """The process's embedder for many texts at once: on the device of
    :func:`device_for`. Raises ConfigError (the device) or EmbeddingError (the model)."""
    if device_for(settings) == "cpu":
        return get_embedder(settings)
    key = (os.getpid(), settings.model, settings.normalize, settings.batch_size)
    embedder = _gpu.get(key)
    if embedder is None:
        with _gpu_lock:
            embedder = _gpu.get(key)
            if embedder is None:
                embedder = SentenceTransformerEmbedder(settings, device="cuda")
                _gpu[key] = embedder
                logger.info("bulk embedding on cuda: %s", embedder.version)
    return embedder
