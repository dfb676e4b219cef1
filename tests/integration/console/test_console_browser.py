"""The web console in a real browser: Chromium (Debian's package) driven by Playwright,
against the real API app served by uvicorn, with memories written through
MemoryClient in immediate mode (the real model, SQLite, the task code).

Screenshots of each page are saved under the session's temporary folder
(``console-screenshots``; the path is printed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_testing import ApiServer, immediate_settings, start_api
from console_browser import chromium_or_skip, launch

from orchmem.models.embedding.embedders import Embedder
from orchmem.models.workspace.memlog import read_log
from orchmem.worker.client.memory_client import MemoryClient

ALPHA, BETA = "alpha", "beta"
XSS = "<script>alert(1)</script> is how the attacker's note starts"
PORT_OLD = "The billing service runs on port 8080"
PORT_NEW = "The billing service now runs on port 9090"


def _memory(content: str, memory_type: str = "Fact", **more: Any) -> dict[str, Any]:
    return {"type": memory_type, "content": content, "importance": 60, "confidence": 0.8,
            "source": {"sourceType": "manual", "capturedBy": "extractor"}, **more}


def _write(client: MemoryClient, *memories: dict[str, Any]) -> list[str]:
    result = client.write_back(memories=list(memories)).wait(60)
    assert result is not None and result["ok"], result
    return list(result["memoryIds"])


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory,
           embedder: Embedder) -> Iterator[tuple[ApiServer, dict[str, str]]]:
    """The API with the console, and alpha's memories in the demo's shape."""
    server = start_api(immediate_settings(tmp_path_factory.mktemp("console") / "root"),
                       [ALPHA, BETA])
    client: MemoryClient = server.app.state.orchmem.client(ALPHA)
    ids: dict[str, str] = {}
    ids["name"], ids["prefers"], ids["launch"], ids["xss"], ids["secret"] = _write(
        client, _memory("The user's name is Dana Reyes", "Identity"),
        _memory("Dana prefers short answers with bullet points", "Preference"),
        _memory("The help center launches in March", "Decision"),
        _memory(XSS, "Observation"),
        _memory("The vault passphrase hint is the first pet", "Fact",
                sensitivity="restricted"))
    ids["old"], ids["new"] = _write(client, _memory(PORT_OLD, createdAt="2026-01-01T00:00:00Z"),
                                    _memory(PORT_NEW, createdAt="2026-02-01T00:00:00Z"))
    assert client.link(ids["launch"], ids["name"], "RelatedTo", reason="Dana owns it").wait(30)
    done = client.supersede(ids["prefers"], content="Dana prefers detailed answers with "
                            "examples", reason="she said so").wait(30)
    assert done is not None and done["ok"], done
    ids["detailed"] = done["supersededBy"]
    reflected = client.reflect().wait(120)
    assert reflected is not None and reflected["proposals"] >= 1, reflected
    with client.run("plan the launch") as run, run.step("decide") as step:
        step.prompt("When does the help center launch?")
        step.write_back(memories=[{"type": "Event",
                                   "content": "The launch review is on Friday"}]).wait(30)
    _write(server.app.state.orchmem.client(BETA), _memory("Beta keeps its own notes"))
    yield server, ids
    server.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("console-screenshots")
    print(f"console screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch(playwright, path)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, seeded: tuple[ApiServer, dict[str, str]]) -> Iterator[Any]:
    """A fresh browser context, logged in as alpha; any dialog fails the test."""
    server, _ = seeded
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(tab, server.tokens[ALPHA])
    yield tab
    context.close()
    assert dialogs == [], f"a dialog fired: {dialogs}"


def login(tab: Any, token: str) -> None:
    tab.goto("/console/login")
    tab.fill("#token", token)
    tab.click("button[type=submit]")
    tab.wait_for_url("**/console/")


def test_login_sets_a_strict_session_and_shows_only_the_tokens_orchestrator(
        page: Any, seeded: tuple[ApiServer, dict[str, str]], shots: Path) -> None:
    del seeded
    assert page.locator("h1").inner_text() == f"Orchestrator {ALPHA}"
    assert "Healthy" in page.content()
    page.screenshot(path=str(shots / "overview.png"), full_page=True)
    [cookie] = [c for c in page.context.cookies() if c["name"] == "orchmem_console"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert not cookie["secure"]  # plain http here; over TLS the cookie is Secure
    headers = page.request.get("/console/").headers
    assert "default-src 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    beta_memory = page.goto("/console/memories?q=Beta+keeps+its+own+notes")
    assert beta_memory is not None and "Beta keeps" not in page.locator("tbody").inner_text()


def test_a_bad_token_is_refused_and_no_page_is_served_without_a_session(
        browser: Any, seeded: tuple[ApiServer, dict[str, str]]) -> None:
    server, _ = seeded
    context = browser.new_context(base_url=server.url)
    tab = context.new_page()
    tab.goto("/console/memories")
    assert tab.url.endswith("/console/login")
    tab.fill("#token", "om_000000000000_" + "A" * 43)
    tab.click("button[type=submit]")
    assert "invalid or revoked token" in tab.content()
    assert tab.request.get("/console/memories").url.endswith("/console/login")
    context.close()


def test_filter_search_and_open_a_memory_with_its_graph_and_history(
        page: Any, seeded: tuple[ApiServer, dict[str, str]], shots: Path) -> None:
    _, ids = seeded
    page.goto("/console/memories")
    page.select_option("select[name=type]", "Decision")
    page.click("form.filters button[type=submit]")
    rows = page.locator("tbody tr")
    assert rows.count() == 1 and "help center launches" in rows.first.inner_text()
    page.select_option("select[name=type]", "")
    page.select_option("select[name=status]", "superseded")
    page.click("form.filters button[type=submit]")
    assert "short answers" in page.locator("tbody").inner_text()
    page.goto("/console/memories")
    page.screenshot(path=str(shots / "memories.png"), full_page=True)
    page.fill("input[name=q]", "which port does billing use")
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**q=which*")
    assert "port 9090" in page.locator("tbody").inner_text()
    page.goto(f"/console/memories/{ids['detailed']}")
    graph = page.locator("svg.graph")
    assert graph.is_visible()
    assert graph.locator("line.edge.Updates").count() == 1
    assert "Updates" in page.locator("table", has_text="Updates / Contradicts").inner_text()
    history = page.locator("table", has_text="Audit history").inner_text()
    assert "supersede" in history or "write" in history
    page.screenshot(path=str(shots / "memory.png"), full_page=True)
    page.click("svg.graph a.gnode:not(.centre)")
    page.wait_for_url(f"**/console/memories/{ids['prefers']}")
    assert "superseded" in page.locator("table.fields").inner_text()


def test_the_recall_explorer_shows_plan_ranks_fusion_modifiers_and_floor(
        page: Any, shots: Path) -> None:
    page.goto("/console/recall")
    page.fill("input[name=q]", "when does the help center launch")
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**/console/recall?q=*")
    ranks = page.locator("table", has_text="Why each memory ranked").inner_text()
    assert "help center launches in March" in ranks
    assert "Fusion (RRF)" in ranks and "≥" in ranks
    assert "intent" in page.locator("table", has_text="The router's plan").inner_text()
    page.screenshot(path=str(shots / "recall.png"), full_page=True)


def test_accept_a_proposal_supersedes_the_older_memory(
        page: Any, seeded: tuple[ApiServer, dict[str, str]], shots: Path) -> None:
    _, ids = seeded
    page.goto("/console/review")
    card = page.locator("article.proposal", has_text="port 9090")
    assert "port 8080" in card.inner_text()
    page.screenshot(path=str(shots / "review.png"), full_page=True)
    card.locator("input[name=reason]").fill("the port moved")
    card.locator("button[value=accept]").click()
    page.wait_for_url("**/console/review?done=accepted")
    assert "Proposal accepted" in page.content()
    assert page.locator("article.proposal", has_text="port 9090").count() == 0
    page.goto(f"/console/memories/{ids['old']}")
    assert "superseded" in page.locator("table.fields").inner_text()


def test_patch_a_summary_and_link_two_memories_from_the_memory_page(
        page: Any, seeded: tuple[ApiServer, dict[str, str]], shots: Path) -> None:
    _, ids = seeded
    page.goto(f"/console/memories/{ids['name']}")
    patch = page.locator("form[action$='/patch']")
    patch.locator("input[name=summary]").fill("Dana Reyes <b>owns</b> the help center")
    patch.locator("select[name=tier]").select_option("profile")
    patch.locator("input[name=reason]").fill("a clearer summary")
    patch.locator("button[type=submit]").click()
    page.wait_for_url(f"**/console/memories/{ids['name']}?done=patched")
    assert "Dana Reyes <b>owns</b> the help center" in page.locator("section.content").inner_text()
    assert "profile" in page.locator("table.fields").inner_text()
    assert "patch" in page.locator("table", has_text="Audit history").inner_text()
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    bad = page.request.post(f"/console/memories/{ids['name']}/link",
                            form={"csrf": csrf, "to": ids["new"], "edgeType": "Owns"})
    assert bad.status == 400 and "edgeType" in bad.text()
    link = page.locator("form[action$='/link']")
    link.locator("input[name=to]").fill(ids["new"])
    link.locator("select[name=edgeType]").select_option("CausedBy")
    link.locator("input[name=reason]").fill("the port note came from Dana")
    link.locator("button[type=submit]").click()
    page.wait_for_url(f"**/console/memories/{ids['name']}?done=linked")
    graph = page.locator("svg.graph")
    assert graph.locator("line.edge.CausedBy").count() == 1
    assert "→ CausedBy" in (graph.text_content() or "")
    page.screenshot(path=str(shots / "patch-link.png"), full_page=True)


def test_hard_forget_names_what_it_erases_and_the_memory_is_gone(
        page: Any, seeded: tuple[ApiServer, dict[str, str]], shots: Path) -> None:
    _, ids = seeded
    page.goto(f"/console/memories/{ids['launch']}")
    page.click("a.danger")
    page.wait_for_url(f"**/console/memories/{ids['launch']}/forget")
    confirm = page.locator(".danger-zone").inner_text()
    assert "The help center launches in March" in confirm and "vector" in confirm
    page.screenshot(path=str(shots / "forget.png"), full_page=True)
    page.fill("#confirm", "not the id")
    assert page.locator("button.danger").is_disabled()
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    wrong = page.request.post(f"/console/memories/{ids['launch']}/forget",
                              form={"csrf": csrf, "hard": "1", "confirm": "not the id"})
    assert wrong.status == 400 and "type the memory id" in wrong.text()
    page.fill("#confirm", ids["launch"])
    page.click("button.danger")
    page.wait_for_url("**/console/memories?done=erased")
    assert "help center launches" not in page.locator("main").inner_text()
    page.goto(f"/console/memories/{ids['launch']}")
    assert "help center launches" not in page.locator("main").inner_text()


def test_keyboard_only_navigation_reaches_the_main_pages(page: Any) -> None:
    for label, path in (("Memories", "/console/memories"), ("Review", "/console/review"),
                        ("Execution log", "/console/log"), ("Bulletin", "/console/bulletin"),
                        ("Overview", "/console/")):
        for _ in range(40):
            page.keyboard.press("Tab")
            focused = page.evaluate("document.activeElement.textContent.trim()")
            if focused == label:
                break
        else:
            pytest.fail(f"Tab never reached the {label} link")
        page.keyboard.press("Enter")
        page.wait_for_url(f"**{path}")
    page.goto("/console/memories")
    page.focus("input[name=q]")
    page.keyboard.type("Dana")
    page.keyboard.press("Enter")
    page.wait_for_url("**q=Dana*")
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("(document.activeElement.getAttribute('href') || '')"
                         ".startsWith('/console/memories/')"):
            break
    else:
        pytest.fail("Tab never reached a memory")
    page.keyboard.press("Enter")
    page.wait_for_url("**/console/memories/m*")
    assert page.locator("table.fields").is_visible()


def test_a_script_in_a_memory_shows_as_text_and_never_runs(
        page: Any, seeded: tuple[ApiServer, dict[str, str]]) -> None:
    _, ids = seeded
    page.goto("/console/memories?type=Observation")
    assert "<script>alert(1)</script>" in page.locator("tbody").inner_text()
    page.goto(f"/console/memories/{ids['xss']}")
    assert "<script>alert(1)</script>" in page.locator(".content").inner_text()
    assert page.locator("main script").count() == 0
    # the page fixture fails the test if any dialog fired


def test_a_post_without_the_csrf_token_is_refused(
        page: Any, seeded: tuple[ApiServer, dict[str, str]]) -> None:
    _, ids = seeded
    target = f"/console/memories/{ids['name']}/retract"
    missing = page.request.post(target, form={"reason": "forged"})
    wrong = page.request.post(target, form={"reason": "forged", "csrf": "x" * 43})
    assert (missing.status, wrong.status) == (403, 403)
    page.goto(f"/console/memories/{ids['name']}")
    assert "active" in page.locator("table.fields").inner_text()


def test_restricted_memories_need_a_stated_purpose_which_is_audited(
        page: Any, seeded: tuple[ApiServer, dict[str, str]]) -> None:
    server, ids = seeded
    page.goto(f"/console/memories/{ids['secret']}")
    assert "no such memory" in page.content()
    page.goto("/console/memories")
    page.fill("#purpose", "incident 7 review")
    page.click("button:has-text('Show restricted')")
    page.wait_for_selector(".restricted-on")
    page.wait_for_url("**/console/memories")
    assert "vault passphrase" in page.locator("tbody").inner_text()
    page.goto(f"/console/memories/{ids['secret']}")
    assert "vault passphrase" in page.locator(".content").inner_text()
    log = server.app.state.orchmem.databases.workspace(ALPHA).log_path
    reads = [r for r in read_log(log) if r["event"] == "restricted_read"]
    assert reads and all(r["purpose"] == "incident 7 review" for r in reads)
    assert ids["secret"] in reads[-1]["memoryIds"]
    page.click("button:has-text('Hide restricted memories')")
    page.wait_for_selector(".restricted-on", state="detached")
    page.goto(f"/console/memories/{ids['secret']}")
    assert "no such memory" in page.content()


def test_log_ingest_and_bulletin_pages(page: Any, shots: Path) -> None:
    page.goto("/console/log")
    page.click("a[href^='/console/log/']")
    steps = page.get_by_role("table", name="Steps, tool calls, checkpoints").inner_text()
    made = page.get_by_role("table", name="Memories this run's steps produced").inner_text()
    assert "prompt" in steps and "launch review" in made
    page.screenshot(path=str(shots / "log.png"), full_page=True)
    page.goto("/console/ingest")
    page.screenshot(path=str(shots / "ingest.png"), full_page=True)
    page.goto("/console/bulletin")
    assert "working.md" in page.content()
    page.screenshot(path=str(shots / "bulletin.png"), full_page=True)
