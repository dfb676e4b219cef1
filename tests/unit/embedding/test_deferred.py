"""An embedder known ahead of loading it: its version predicted, its model loaded on use."""

from __future__ import annotations

import numpy as np
import pytest

from orchmem.config import EmbeddingError
from orchmem.config.settings import EmbeddingSettings
from orchmem.models.embedding.embedders import (
    DeferredEmbedder,
    Embedder,
    get_embedder,
    predicted_version,
)


def test_the_predicted_version_is_the_loaded_models() -> None:
    for settings in (EmbeddingSettings(), EmbeddingSettings(normalize=False)):
        loaded = get_embedder(settings)
        assert predicted_version(settings, loaded.dim) == loaded.version
    assert predicted_version(EmbeddingSettings(), 768) != get_embedder(EmbeddingSettings()).version


def test_a_plug_in_backend_has_no_predicted_version() -> None:
    assert predicted_version(EmbeddingSettings(backend="my_pkg.embed:make"), 384) is None


def test_the_model_is_loaded_on_the_first_encode_only() -> None:
    settings = EmbeddingSettings()
    made: list[Embedder] = []

    def make() -> Embedder:
        made.append(get_embedder(settings))
        return made[-1]

    version = predicted_version(settings, 384)
    assert version is not None
    deferred = DeferredEmbedder(make, version, 384)
    assert deferred.encode([]).shape == (0, 384) and not made
    vectors = deferred.encode(["The user prefers tea", "The shop closes at six"])
    deferred.encode(["again"])
    assert len(made) == 1
    assert np.array_equal(vectors, get_embedder(settings).encode(
        ["The user prefers tea", "The shop closes at six"]))


def test_a_model_that_is_not_the_one_expected_is_refused() -> None:
    deferred = DeferredEmbedder(lambda: get_embedder(EmbeddingSettings()),
                                "all-MiniLM-L6-v2:768:norm", 768)
    with pytest.raises(EmbeddingError, match="not the all-MiniLM-L6-v2:768:norm expected"):
        deferred.encode(["anything"])
