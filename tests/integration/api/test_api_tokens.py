"""API tokens: shown once, only the hash stored (0600, atomic), bound to one orchestrator."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from orchmem_testing import make_settings

from orchmem.config import ConfigError, MemoryNotFound, MemoryValidationError, Settings
from orchmem.models.workspace.folders import Workspace
from orchmem.worker.api.tokens import TokenStore, token_hash
from orchmem.worker.cli.main import main


@pytest.fixture
def root_settings(tmp_path: Path) -> Settings:
    settings = make_settings(tmp_path / "root", "redis://127.0.0.1:1/0")
    for orch in ("alpha", "beta"):
        Workspace.for_orchestrator(settings, orch).ensure()
    return settings


def test_create_stores_only_the_hash_in_a_private_file(root_settings: Settings) -> None:
    store = TokenStore(root_settings)
    token, record = store.create("alpha")
    text = store.path.read_text()
    assert token not in text and token.split("_", 2)[2] not in text
    assert record.sha256 == token_hash(token) and record.sha256 in text
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert [p.name for p in store.path.parent.iterdir()] == ["tokens.json"]
    assert store.verify(token) == record


def test_a_token_verifies_only_as_itself(root_settings: Settings) -> None:
    store = TokenStore(root_settings)
    token, _ = store.create("alpha")
    other, _ = store.create("beta")
    assert store.verify(other).orchestrator_id == "beta"  # type: ignore[union-attr]
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    for forged in (flipped, "", "om_", token + "x", token.upper(), token.replace("om_", "xx_"),
                   f"om_{other.split('_')[1]}_{token.split('_', 2)[2]}"):
        assert store.verify(forged) is None, forged


def test_creating_a_token_for_an_unknown_orchestrator_fails(root_settings: Settings) -> None:
    store = TokenStore(root_settings)
    with pytest.raises(MemoryNotFound, match="unknown orchestrator 'ghost'"):
        store.create("ghost")
    with pytest.raises(MemoryValidationError):
        store.create("../alpha")
    assert not store.path.exists()


def test_revoke_one_or_all_and_unknown_ids(root_settings: Settings) -> None:
    store = TokenStore(root_settings)
    first, r1 = store.create("alpha")
    second, r2 = store.create("alpha")
    beta, _ = store.create("beta")
    assert store.revoke("alpha", r1.token_id) == [r1.token_id]
    assert store.verify(first) is None and store.verify(second) is not None
    with pytest.raises(MemoryNotFound):
        store.revoke("beta", r2.token_id)  # another orchestrator's token id
    with pytest.raises(MemoryValidationError):
        store.revoke("alpha", "not-an-id")
    assert store.revoke("alpha", None) == [r2.token_id]
    assert store.verify(second) is None and store.verify(beta) is not None
    assert [r.orchestrator_id for r in store.records()] == ["beta"]


def test_a_damaged_store_fails_closed(root_settings: Settings) -> None:
    store = TokenStore(root_settings)
    store.create("alpha")
    store.path.write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable token store"):
        store.verify("om_000000000000_" + "a" * 43)


def test_cli_create_prints_the_token_alone_on_stdout(root_settings: Settings) -> None:
    base = ["--root", str(root_settings.root)]
    created = CliRunner().invoke(main, [*base, "token", "create", "--orch", "alpha"])
    assert created.exit_code == 0, created.output
    # What TOKEN=$(orchmem token create ...) captures: one line, the token.
    [secret] = created.stdout.splitlines()
    record = TokenStore(root_settings).verify(secret)
    assert record is not None and record.orchestrator_id == "alpha"
    assert created.stderr.strip() == (f"(token id {record.token_id} for alpha: store it now, "
                                      "it is not shown again)")


def test_cli_create_list_revoke(root_settings: Settings) -> None:
    runner = CliRunner()
    base = ["--root", str(root_settings.root)]
    created = runner.invoke(main, [*base, "token", "create", "--orch", "alpha", "--json"])
    assert created.exit_code == 0, created.output
    data = json.loads(created.output)
    assert TokenStore(root_settings).verify(data["token"]) is not None
    listed = runner.invoke(main, [*base, "token", "list", "--orch", "alpha", "--json"])
    assert json.loads(listed.output)["tokens"] == [
        {"tokenId": data["tokenId"], "orchestratorId": "alpha", "createdAt": data["createdAt"]}]
    assert data["token"] not in listed.output
    unknown = runner.invoke(main, [*base, "token", "create", "--orch", "ghost", "--json"])
    # OrchmemGroup reads --json from sys.argv (pytest's here): the one-line form.
    assert unknown.exit_code == 3 and "unknown orchestrator 'ghost'" in unknown.output
    both = runner.invoke(main, [*base, "token", "revoke", "--orch", "alpha"])
    assert both.exit_code == 2
    revoked = runner.invoke(main, [*base, "token", "revoke", "--orch", "alpha", "--all"])
    assert revoked.exit_code == 0 and data["tokenId"] in revoked.output
    assert TokenStore(root_settings).verify(data["token"]) is None
