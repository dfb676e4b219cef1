"""The registry: a setting names a built-in implementation or a "package.module:attr" plug-in."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from orchmem.config import ConfigError, EmbeddingError, MemoryValidationError, load_settings
from orchmem.config.settings import EmbeddingSettings
from orchmem.models.core.registry import resolve
from orchmem.models.embedding.embedders import Embedder, get_embedder
from orchmem.models.writeback.extraction import load_extractor, rules_extractor

BUILT_IN = {"dumps": json.dumps}

FAKE_EMBEDDER = '''
import numpy as np
from orchmem.models.embedding.embedders import Embedder

MADE = []


class OnesEmbedder(Embedder):
    def __init__(self, settings):
        MADE.append(settings)
        self.dim = 3
        self.version = "ones:3:norm"

    def encode(self, texts):
        return np.ones((len(texts), 3), dtype=np.float32)


def not_an_embedder(settings):
    return "nope"


def broken(settings):
    raise RuntimeError("no GPU here")
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of an importable module holding a fake embedder and two bad factories."""
    (tmp_path / "orchmem_fake_embedder.py").write_text(FAKE_EMBEDDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "orchmem_fake_embedder"


def test_a_built_in_name_resolves_to_its_implementation() -> None:
    assert resolve("dumps", BUILT_IN, setting="x.y", error=ConfigError) is json.dumps
    assert load_extractor("rules") is rules_extractor


def test_a_dotted_spec_imports_the_attribute() -> None:
    assert resolve("json:loads", BUILT_IN, setting="x.y", error=ConfigError) is json.loads


def test_an_unknown_name_fails_naming_the_setting_and_the_built_ins() -> None:
    with pytest.raises(ConfigError, match=r"x\.y 'dumpz' is not a built-in name \('dumps'\)"):
        resolve("dumpz", BUILT_IN, setting="x.y", error=ConfigError)


@pytest.mark.parametrize("spec", ["no.such.module:thing", "json:no_such_attr"])
def test_an_import_failure_fails_naming_the_setting(spec: str) -> None:
    with pytest.raises(MemoryValidationError, match=rf"x\.y '{spec}' cannot be imported"):
        resolve(spec, BUILT_IN, setting="x.y", error=MemoryValidationError)


def test_an_attribute_that_is_not_callable_is_refused() -> None:
    with pytest.raises(ConfigError, match="is not callable"):
        resolve("json:__doc__", BUILT_IN, setting="x.y", error=ConfigError)


def test_the_embedding_backend_setting_chooses_a_plugged_in_embedder(plugin: str) -> None:
    settings = EmbeddingSettings(backend=f"{plugin}:OnesEmbedder", model="unused-here")
    embedder = get_embedder(settings)
    assert isinstance(embedder, Embedder) and embedder.version == "ones:3:norm"
    assert np.array_equal(embedder.encode(["a", "b"]), np.ones((2, 3), dtype=np.float32))
    # One embedder per process per settings: the second call reuses the first.
    assert get_embedder(settings) is embedder
    assert len(importlib.import_module(plugin).MADE) == 1


@pytest.mark.parametrize(("attr", "message"), [
    ("missing", "cannot be imported"),
    ("not_an_embedder", "made a str, not an Embedder"),
    ("broken", "failed to start: no GPU here"),
])
def test_a_bad_embedding_backend_is_an_embedding_error(plugin: str, attr: str,
                                                       message: str) -> None:
    with pytest.raises(EmbeddingError, match=rf"embedding\.backend .*{message}"):
        get_embedder(EmbeddingSettings(backend=f"{plugin}:{attr}", model="unused-here"))


def test_an_unknown_backend_name_fails_when_settings_load() -> None:
    with pytest.raises(ConfigError, match=r"embedding\.backend"):
        load_settings(environ={"ORCHMEM_EMBEDDING__BACKEND": "word2vec"})
    assert load_settings(environ={}).embedding.backend == "onnx"
