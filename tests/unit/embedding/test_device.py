"""Choosing where bulk embedding runs: ``embedding.device`` against the machine."""

from __future__ import annotations

import pytest

from orchmem.config import ConfigError, load_settings
from orchmem.config.settings import EmbeddingSettings
from orchmem.models.embedding.device import bulk_embedder, choose_device, device_for
from orchmem.models.embedding.embedders import get_embedder

BUILT_IN = ("onnx", "sentence-transformers")
PLUG_IN = "my_pkg.embed:make"


@pytest.mark.parametrize("backend", [*BUILT_IN, PLUG_IN])
@pytest.mark.parametrize("cuda", [True, False])
def test_cpu_is_the_cpu_whatever_the_machine(backend: str, cuda: bool) -> None:
    assert choose_device("cpu", backend, cuda) == "cpu"


@pytest.mark.parametrize("backend", BUILT_IN)
def test_auto_takes_the_gpu_only_when_there_is_one(backend: str) -> None:
    assert choose_device("auto", backend, cuda=True) == "cuda"
    assert choose_device("auto", backend, cuda=False) == "cpu"


def test_auto_leaves_a_plug_in_backend_on_its_own_device() -> None:
    assert choose_device("auto", PLUG_IN, cuda=True) == "cpu"


@pytest.mark.parametrize("backend", BUILT_IN)
def test_cuda_with_a_gpu_is_the_gpu(backend: str) -> None:
    assert choose_device("cuda", backend, cuda=True) == "cuda"


@pytest.mark.parametrize("backend", BUILT_IN)
def test_cuda_without_a_gpu_is_a_config_error_naming_the_field(backend: str) -> None:
    with pytest.raises(ConfigError, match=r"embedding\.device = 'cuda'.*no CUDA GPU"):
        choose_device("cuda", backend, cuda=False)


def test_cuda_with_a_plug_in_backend_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"embedding\.device = 'cuda' needs a built-in"):
        choose_device("cuda", PLUG_IN, cuda=True)


def test_an_unknown_device_is_refused_by_the_choice_too() -> None:
    with pytest.raises(ConfigError, match=r"embedding\.device must be"):
        choose_device("tpu", "onnx", cuda=True)


@pytest.mark.parametrize("value", ["gpu", "CUDA", "cuda:0", "mps", ""])
def test_settings_validation_refuses_values_outside_the_list(value: str) -> None:
    with pytest.raises(ConfigError, match=r"embedding\.device"):
        load_settings(environ={"ORCHMEM_EMBEDDING__DEVICE": value})


@pytest.mark.parametrize("value", ["auto", "cpu", "cuda"])
def test_settings_accept_the_three_values(value: str) -> None:
    settings = load_settings(environ={"ORCHMEM_EMBEDDING__DEVICE": value})
    assert settings.embedding.device == value


def test_the_default_is_auto() -> None:
    assert EmbeddingSettings().device == "auto"


def test_cpu_bulk_embedding_is_the_recall_embedder_itself() -> None:
    settings = EmbeddingSettings(device="cpu")
    assert device_for(settings) == "cpu"
    assert bulk_embedder(settings) is get_embedder(settings)


def test_auto_on_this_machine_follows_what_torch_sees() -> None:
    import torch

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert device_for(EmbeddingSettings(device="auto")) == expected
