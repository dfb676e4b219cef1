"""The ONNX export of a sentence-transformers model, made locally once and cached.

The ONNX Runtime embedder (``models/embedding/onnx.py``) runs a graph exported here
from the packaged weights, never one fetched from anywhere. The graph is the
transformer followed by the model's mean pooling (the embedder normalizes, as the
model's ``Normalize`` module or ``embedding.normalize`` asks).

The cache is a folder (``embedding.cache_dir``; by default beside the model, or the
user's cache folder when the model's folder is read-only) holding, per model,
``<label>-<key>.onnx`` and a manifest ``<label>-<key>.json``. ``key`` hashes the model's
files (weights, config, tokenizer) and :data:`EXPORT_FORMAT`, so a changed model or a
changed graph is exported afresh. The manifest records the size and SHA-256 of the
graph: a missing, truncated or altered file fails that check and is exported again.
Files are written under a temporary name and renamed, so a process never reads a
half-written graph and two processes exporting at once both end with a whole one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchmem.config import EmbeddingError
from orchmem.models.workspace.atomic import file_sha256
from orchmem.models.workspace.private import private_dir

logger = logging.getLogger(__name__)

#: Bumped when the exported graph changes shape (inputs, pooling, opset): old exports
#: are then ignored and made again.
EXPORT_FORMAT = "meanpool-opset17-v1"
#: The model files whose content keys the export.
_KEYED_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json",
                "1_Pooling/config.json", "modules.json")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: Probe texts checked against the PyTorch model after an export (different lengths,
#: so the padded batch exercises the attention mask).
_PROBES = ("The user prefers tea to coffee.", "ok",
           "Deploy the staging cluster on Friday after the security audit has been signed "
           "off by the platform team, and tell Dana when it is done.")


@dataclass(frozen=True)
class Export:
    """A verified graph on disk."""

    path: Path
    key: str


def model_key(model_dir: Path) -> str:
    """A hash of the model's files and the export format: the export's cache key."""
    digest = hashlib.sha256(EXPORT_FORMAT.encode())
    for name in _KEYED_FILES:
        path = model_dir / name
        if path.is_file():
            digest.update(name.encode())
            digest.update(file_sha256(path).encode())
    return digest.hexdigest()[:16]


def default_cache_dir(model_dir: Path) -> Path:
    """Beside the model when that folder is writable, else the user's cache folder."""
    if os.access(model_dir, os.W_OK):
        return model_dir / "orchmem-onnx"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orchmem" / "onnx"


def cached_export(model_dir: Path, label: str, cache_dir: Path) -> Export:
    """The verified export of ``model_dir`` in ``cache_dir``, exported first if it is
    missing or fails its check. Raises EmbeddingError when it cannot be made."""
    key = model_key(model_dir)
    stem = f"{_safe(label)}-{key}"
    graph, manifest = cache_dir / f"{stem}.onnx", cache_dir / f"{stem}.json"
    problem = _check(graph, manifest, key)
    if problem is None:
        return Export(graph, key)
    logger.info("exporting %s to ONNX (%s)", label, problem)
    try:
        private_dir(cache_dir)
        size, sha = _export(model_dir, graph)
        _write_atomic(manifest, json.dumps({"key": key, "format": EXPORT_FORMAT,
                                            "size": size, "sha256": sha}).encode())
    except EmbeddingError:
        raise
    except Exception as exc:  # torch's exporter, the file system: reported as ours
        raise EmbeddingError(f"cannot export {label} to ONNX in {cache_dir}: {exc}; "
                             "set embedding.cache_dir to a writable folder, or "
                             "embedding.backend = 'sentence-transformers'") from exc
    problem = _check(graph, manifest, key)
    if problem is not None:
        raise EmbeddingError(f"the ONNX export of {label} in {cache_dir} fails its check "
                             f"right after export: {problem}")
    return Export(graph, key)


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:80]


def _check(graph: Path, manifest: Path, key: str) -> str | None:
    """None when the graph is whole and of this key, else what is wrong with it."""
    try:
        recorded = json.loads(manifest.read_text("utf-8"))
        size = graph.stat().st_size
    except FileNotFoundError:
        return "no export yet"
    except (OSError, ValueError) as exc:
        return f"unreadable manifest: {exc}"
    if not isinstance(recorded, dict) or recorded.get("key") != key:
        return "manifest of another model"
    if recorded.get("size") != size:
        return f"graph is {size} bytes, manifest says {recorded.get('size')}"
    if recorded.get("sha256") != file_sha256(graph):
        return "graph content does not match its manifest"
    return None


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _export(model_dir: Path, graph: Path) -> tuple[int, str]:
    """Export to a temporary file, check it against PyTorch, rename it into place."""
    import torch

    pooled = _pooled_model(model_dir)
    fd, tmp_name = tempfile.mkstemp(dir=graph.parent, prefix=f".{graph.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        example = _probe_batch(model_dir)
        axes = {name: {0: "batch", 1: "tokens"} for name in _INPUTS}
        with torch.inference_mode(), warnings.catch_warnings():
            # Tracing warns about Python conditionals on shapes; the check below is what
            # tells whether the traced graph is right for other lengths and batches.
            warnings.simplefilter("ignore")
            # The TorchScript exporter: it needs only the ``onnx`` package (the dynamo
            # exporter would add onnxscript) and handles BERT's graph as traced.
            torch.onnx.export(pooled, tuple(torch.from_numpy(example[n]) for n in _INPUTS),
                              str(tmp), input_names=list(_INPUTS), output_names=["embedding"],
                              dynamic_axes={**axes, "embedding": {0: "batch"}},
                              opset_version=17, dynamo=False)
        _verify(tmp, pooled, example)
        size, sha = tmp.stat().st_size, file_sha256(tmp)
        os.replace(tmp, graph)
    finally:
        tmp.unlink(missing_ok=True)
    return size, sha


def _pooled_model(model_dir: Path) -> Any:
    import torch
    from transformers import AutoModel

    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text("utf-8")) \
        if (model_dir / "1_Pooling" / "config.json").is_file() else {}
    if not pooling.get("pooling_mode_mean_tokens", False) or any(
            pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                     "pooling_mode_mean_sqrt_len_tokens")):
        raise EmbeddingError(f"the onnx backend supports models with mean pooling only; "
                             f"{model_dir} pools otherwise: use embedding.backend = "
                             "'sentence-transformers'")
    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            # sentence-transformers' mean pooling: masked sum over a clamped count.
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

    return Pooled().eval()


def _probe_batch(model_dir: Path) -> dict[str, Any]:
    from orchmem.models.embedding.onnx import load_tokenizer, to_inputs

    tokenizer = load_tokenizer(model_dir)
    return to_inputs(tokenizer.encode_batch(list(_PROBES)))


def _verify(graph: Path, pooled: Any, example: dict[str, Any]) -> None:
    """The exported graph must give PyTorch's vectors, to float noise."""
    import numpy as np
    import onnxruntime
    import torch

    session = onnxruntime.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    got = session.run(None, example)[0]
    with torch.inference_mode():
        want = pooled(*(torch.from_numpy(example[n]) for n in _INPUTS)).numpy()
    worst = float(np.abs(got - want).max())
    if worst > 1e-4:
        raise EmbeddingError(f"the ONNX export of {graph.name} differs from the PyTorch "
                             f"model by {worst:.2g}; use embedding.backend = "
                             "'sentence-transformers'")
