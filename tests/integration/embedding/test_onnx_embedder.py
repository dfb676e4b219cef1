"""The onnx embedding backend: the same vectors as sentence-transformers, chosen by
settings, and an export cache that heals itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from orchmem_testing import make_settings

from orchmem.config import ConfigError, EmbeddingError, load_settings
from orchmem.config.settings import EmbeddingSettings
from orchmem.models.core.shapes import MemoryInput, validate
from orchmem.models.embedding.embedders import Embedder, SentenceTransformerEmbedder, get_embedder
from orchmem.models.embedding.onnx import OnnxEmbedder
from orchmem.models.recall.search import recall
from orchmem.models.storage.db.database import Databases
from orchmem.models.writeback.apply import write_memories

TEXTS = [
    "The user prefers tea to coffee.", "ok", "", "What does Alice prefer?",
    "Deploy the staging cluster on Friday after the security audit is signed off.",
    "Ünïcödé, тест, 日本語 and emoji 🚀 in one line",
    "word " * 600,  # past the model's 256 tokens: truncated the same way
    *(f"Note {i}: the quarterly report goes to finance by the {i}th" for i in range(40)),
]


@pytest.fixture(scope="module")
def torch_embedder() -> Embedder:
    return get_embedder(EmbeddingSettings(backend="sentence-transformers"))


def test_the_default_backend_is_onnx_and_the_setting_selects_either(
        embedder: Embedder, torch_embedder: Embedder) -> None:
    assert EmbeddingSettings().backend == "onnx"
    assert isinstance(embedder, OnnxEmbedder)
    assert isinstance(torch_embedder, SentenceTransformerEmbedder)
    assert get_embedder(EmbeddingSettings(backend="onnx")) is get_embedder(EmbeddingSettings())


def test_onnx_vectors_equal_sentence_transformers_to_float_noise(
        embedder: Embedder, torch_embedder: Embedder) -> None:
    fast, eager = embedder.encode(TEXTS), torch_embedder.encode(TEXTS)
    assert fast.shape == eager.shape == (len(TEXTS), 384) and fast.dtype == np.float32
    cosines = (fast * eager).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines.min()
    assert np.abs(fast - eager).max() < 1e-4
    # One at a time (the query path, no padding) gives the batch's vectors.
    singles = np.stack([embedder.encode_one(t) for t in TEXTS[:8]])
    assert np.abs(singles - fast[:8]).max() < 1e-5
    # Same vectors, so the same version: nothing is re-embedded when switching.
    assert embedder.version == torch_embedder.version == "all-MiniLM-L6-v2:384:norm"


def test_an_unknown_backend_is_a_config_error_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"embedding\.backend"):
        load_settings(environ={"ORCHMEM_EMBEDDING__BACKEND": "onnx-int8"})


def test_an_unwritable_cache_folder_is_an_embedding_error_saying_what_to_do(
        tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(EmbeddingError, match=r"cannot export .* embedding\.cache_dir"):
        OnnxEmbedder(EmbeddingSettings(cache_dir=blocker / "cache"))


def test_a_truncated_export_is_made_again(embedder: Embedder, tmp_path: Path) -> None:
    # (A missing export is the first run's case: CI's fresh venv has none beside the
    # model, so the session's embedder fixture exports it. One export here is enough.)
    assert isinstance(embedder, OnnxEmbedder)
    good = embedder.export.path
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in (good.name, good.with_suffix(".json").name):
        shutil.copy(good.parent / name, cache / name)
    graph = cache / good.name
    size = graph.stat().st_size
    settings = EmbeddingSettings(cache_dir=cache)
    reference = embedder.encode_one(TEXTS[0])

    with graph.open("r+b") as handle:  # a crash or a full disk cut the file short
        handle.truncate(size // 3)
    healed = OnnxEmbedder(settings)
    assert healed.export.path == graph and graph.stat().st_size == size
    assert np.abs(healed.encode_one(TEXTS[0]) - reference).max() < 1e-5
    assert not list(cache.glob(".*.tmp"))  # no temporary file left behind


def test_recall_answers_the_same_ids_with_either_backend(tmp_path: Path,
                                                         embedder: Embedder) -> None:
    fast = Databases(make_settings(tmp_path, ""))
    eager = Databases(make_settings(tmp_path, "", embedding={
        "backend": "sentence-transformers"}))
    odb = fast.open("either")
    assert odb is not None
    memories = [validate(MemoryInput, {"type": "Fact", "content": text,
                                       "source": {"sourceType": "manual",
                                                  "capturedBy": "user"}},
                         workspace=odb.workspace) for text in TEXTS[7:] + TEXTS[:2]]
    write_memories(odb, key="seed", task="t", memories=memories,
                   vectors=list(embedder.encode([m.content for m in memories])),
                   embedder=embedder.version)
    for query in ("Which report goes to finance?", "tea or coffee", "note 17",
                  "what is due on the 3th"):
        one = recall("either", query, databases=fast, mode="vector")
        other = recall("either", query, databases=eager, mode="vector")
        assert one.memory_ids and one.memory_ids == other.memory_ids, query
        hybrid = recall("either", query, databases=fast)
        assert hybrid.memory_ids == recall("either", query, databases=eager).memory_ids
