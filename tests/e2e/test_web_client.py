"""The bundled web client, driven in headless Chromium against a real ``outlast serve``.

Each test uses the demo agent with short knobs so the file runs in well under a
minute. Waits are generous; nothing asserts on timing.

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright``
Python package; no Playwright browser download is used. Without Chromium the
tests skip, or fail under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.server import ServerProcess

pytestmark = pytest.mark.browser

# The tests share one server (``module_server``) with its default keepalive; each test
# uses its own thread.
SERVER_ARGS: tuple[str, ...] = ()

CHROMIUM = os.environ.get("OUTLAST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 30_000

# Short, but long enough to act on a run while it is still going.
QUICK = {"steps": 3, "step_delay_ms": 300, "tokens_per_message": 12, "token_delay_ms": 20}
SLOW = {"steps": 5, "step_delay_ms": 500, "tokens_per_message": 24, "token_delay_ms": 40}


def _browser_missing() -> str | None:
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = _browser_missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A browser context whose pages must work under the server's Content-Security-
    Policy: anything it refuses (an inline script or style, a foreign load) fails the
    test that caused it."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    violations: list[str] = []
    ctx.on("console", lambda msg: violations.append(msg.text)
           if "Content Security Policy" in msg.text else None)
    yield ctx
    ctx.close()
    assert not violations, violations


def _with_knobs(ctx: Any, knobs: dict[str, Any]) -> None:
    """Every page of this context sends these demo knobs with its runs."""
    ctx.add_init_script(f"localStorage.setItem('outlast.demo', {json.dumps(json.dumps(knobs))})")


def _thread_id(page: Any) -> str:
    page.wait_for_url("**/?thread=*", timeout=WAIT_MS)
    return str(page.url.split("thread=")[1].split("&")[0])


def _send(page: Any, text: str) -> str:
    page.get_by_test_id("composer").fill(text)
    page.get_by_test_id("send").click()
    return _thread_id(page)


def _wait_for_text(page: Any, min_assistant: int = 1) -> None:
    """Until the run is going and some assistant text has streamed in."""
    from playwright.sync_api import expect

    expect(page.get_by_test_id("run-status")).to_have_text("running", timeout=WAIT_MS)
    page.wait_for_function(
        """n => [...document.querySelectorAll(
                   '[data-testid=message][data-role=assistant] .content')]
                 .filter(e => e.textContent.length > 0).length >= n""",
        arg=min_assistant,
        timeout=WAIT_MS,
    )


def _message_ids(page: Any) -> list[str]:
    return list(
        page.eval_on_selector_all(
            "[data-testid=message]", "els => els.map(e => e.dataset.messageId)"
        )
    )


def _stored_thread(server: str, thread_id: str) -> dict[str, Any]:
    response = httpx.get(f"{server}/threads/{thread_id}", timeout=10)
    response.raise_for_status()
    return dict(response.json())


def _assert_matches_store(page: Any, server: str, thread_id: str) -> None:
    """The page shows exactly the stored messages, in order, with the same text."""
    stored = [m for m in _stored_thread(server, thread_id)["messages"] if m["role"] != "activity"]
    assert _message_ids(page) == [m["id"] for m in stored]
    for m in stored:
        text = m.get("content")
        if m["role"] in ("user", "assistant") and isinstance(text, str) and text:
            shown = page.locator(f"[data-message-id='{m['id']}'] .content").first.text_content()
            assert shown == text, f"message {m['id']} differs from the store"


def _run_until_interrupted(server: str, thread_id: str) -> str:
    """Start a demo run over HTTP, with no page open, and read it until it stops for approval."""
    run_id = str(uuid.uuid4())
    body = {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": "deploy the thing"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {"demo": {**QUICK, "steps": 2, "approve_at": [1]}},
    }
    last: dict[str, Any] = {}
    with httpx.stream(
        "POST",
        f"{server}/agents/demo",
        json=body,
        headers={"Accept": "text/event-stream"},
        timeout=30,
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data:"):
                last = json.loads(line[5:])
    assert last.get("type") == "RUN_FINISHED", last
    assert last.get("outcome", {}).get("type") == "interrupt", last
    return run_id


def test_reload_mid_run_keeps_messages_and_follows_to_the_end(
    context: Any, module_server: ServerProcess
) -> None:
    from playwright.sync_api import expect

    _with_knobs(context, SLOW)
    page = context.new_page()
    page.goto(module_server.url + "/")
    thread_id = _send(page, "plan a small trip")
    _wait_for_text(page)
    before = _message_ids(page)
    assert before

    page.reload()
    status = page.get_by_test_id("run-status")
    for message_id in before:
        expect(page.locator(f"[data-message-id='{message_id}']")).to_have_count(1, timeout=WAIT_MS)
    expect(status).to_have_text("succeeded", timeout=WAIT_MS)
    after = _message_ids(page)
    assert set(before) <= set(after)
    assert len(after) > len(before)
    _assert_matches_store(page, module_server.url, thread_id)


def test_network_drop_reconnects_without_losing_or_duplicating_text(
    context: Any, module_server: ServerProcess
) -> None:
    from playwright.sync_api import expect

    _with_knobs(context, SLOW)
    page = context.new_page()
    page.goto(module_server.url + "/")
    thread_id = _send(page, "write three short notes")
    _wait_for_text(page)

    connection = page.get_by_test_id("connection")
    context.set_offline(True)
    expect(connection).to_have_attribute("data-state", "reconnecting", timeout=WAIT_MS)
    page.wait_for_timeout(1500)  # let the run move on while the page cannot see it
    context.set_offline(False)

    expect(page.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)
    assert int(connection.get_attribute("data-reconnects") or 0) >= 1
    _assert_matches_store(page, module_server.url, thread_id)


def test_stop_cancels_the_run(context: Any, module_server: ServerProcess) -> None:
    from playwright.sync_api import expect

    _with_knobs(context, {**SLOW, "steps": 8})
    page = context.new_page()
    page.goto(module_server.url + "/")
    thread_id = _send(page, "a long job")
    _wait_for_text(page)

    page.get_by_test_id("stop").click()
    expect(page.get_by_test_id("run-status")).to_have_text("cancelled", timeout=WAIT_MS)
    runs = httpx.get(f"{module_server.url}/threads/{thread_id}/runs", timeout=10).json()
    runs = runs if isinstance(runs, list) else runs.get("runs", runs.get("items", []))
    assert runs[0]["status"] == "cancelled"


def test_approval_raised_while_closed_is_shown_on_open_and_can_be_approved(
    context: Any, module_server: ServerProcess
) -> None:
    from playwright.sync_api import expect

    thread_id = str(uuid.uuid4())
    _run_until_interrupted(module_server.url, thread_id)

    _with_knobs(context, QUICK)
    page = context.new_page()
    page.goto(f"{module_server.url}/?thread={thread_id}")
    expect(page.get_by_test_id("run-status")).to_have_text("interrupted", timeout=WAIT_MS)
    expect(page.get_by_test_id("interrupt")).to_have_count(1, timeout=WAIT_MS)

    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)
    expect(page.get_by_test_id("interrupt")).to_have_count(0)
    assert _stored_thread(module_server.url, thread_id)["interrupts"] == []
    _assert_matches_store(page, module_server.url, thread_id)


def test_approving_in_a_second_tab_updates_the_first(
    browser: Any, module_server: ServerProcess
) -> None:
    from playwright.sync_api import expect

    thread_id = str(uuid.uuid4())
    _run_until_interrupted(module_server.url, thread_id)
    url = f"{module_server.url}/?thread={thread_id}"

    # Two contexts: two devices, sharing nothing but the server.
    first_ctx = browser.new_context()
    second_ctx = browser.new_context()
    try:
        first = first_ctx.new_page()
        first.goto(url)
        expect(first.get_by_test_id("interrupt")).to_have_count(1, timeout=WAIT_MS)

        second = second_ctx.new_page()
        second.goto(url)
        second.get_by_test_id("approve").click()
        expect(second.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)

        expect(first.get_by_test_id("interrupt")).to_have_count(0, timeout=WAIT_MS)
        expect(first.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)
        _assert_matches_store(first, module_server.url, thread_id)
    finally:
        first_ctx.close()
        second_ctx.close()


def test_reasoning_and_a_subagent_are_shown(context: Any, module_server: ServerProcess) -> None:
    """AG-UI 1.0: reasoning is shown folded away as "thinking", a subagent's messages
    are set apart and named as the SUBAGENT_STARTED event names it."""
    from playwright.sync_api import expect

    _with_knobs(context, {**QUICK, "steps": 2, "think": True, "delegate": True})
    page = context.new_page()
    page.goto(module_server.url + "/")
    thread_id = _send(page, "think it through")
    expect(page.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)
    stored = _stored_thread(module_server.url, thread_id)["messages"]
    reasoning = [m for m in stored if m["role"] == "reasoning"]
    assert len(reasoning) == 3
    _assert_matches_store(page, module_server.url, thread_id)
    shown = page.get_by_test_id("reasoning")
    expect(shown).to_have_count(3)
    first = shown.first
    assert first.locator("summary").text_content() == "thinking"
    expect(first.locator(".content")).not_to_be_visible()  # folded away until asked
    first.locator("summary").click()
    expect(first.locator(".content")).to_have_text(reasoning[0]["content"])
    sub = page.locator("[data-testid=message].subagent")
    expect(sub).to_have_count(2)  # the reviewer's reasoning and its answer
    expect(sub.last.locator(".meta")).to_have_text("assistant · subagent reviewer")
    expect(sub.last.locator(".content")).to_contain_text("Review: all 2 steps look right.")


def test_the_page_works_under_its_content_security_policy(
        browser: Any, module_server: ServerProcess) -> None:
    """The policy is in force (an injected inline script does not run) and the web
    client and /docs still work under it."""
    from playwright.sync_api import expect

    ctx = browser.new_context()
    _with_knobs(ctx, QUICK)  # a short run: the page's work is what is checked
    refused: list[str] = []
    ctx.on("console", lambda msg: refused.append(msg.text)
           if "Content Security Policy" in msg.text else None)
    try:
        page = ctx.new_page()
        response = page.goto(module_server.url + "/")
        assert response is not None
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        _send(page, "hello")
        expect(page.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)
        page.evaluate("""() => { const s = document.createElement('script');
                                 s.textContent = 'window.injected = true';
                                 document.body.appendChild(s); }""")
        assert page.evaluate("() => window.injected === undefined")
        assert any("inline script" in text for text in refused), refused
        refused.clear()

        docs = ctx.new_page()
        docs.goto(module_server.url + "/docs")
        expect(docs.locator(".swagger-ui .info .title")).to_contain_text("outlast",
                                                                         timeout=WAIT_MS)
        assert not refused, refused
    finally:
        ctx.close()


def test_a_tool_cut_off_by_a_crash_is_answered_on_its_card(
    context: Any, server_factory: Any, tmp_path: Any
) -> None:
    """SIGKILL while the demo's tool runs: the page opened after the restart shows the
    question (did it happen?) with its three answers; "Run it again" runs it once."""
    import time

    from playwright.sync_api import expect

    from tests.support.runs import effect_counts, effect_status
    from tests.support.server import demo_input

    data = tmp_path / "store"
    server = server_factory(data_dir=data)
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    # Long enough for the kill to land inside the tool; the continuation takes as long.
    body = demo_input(thread_id, run_id, steps=1, step_delay_ms=4000, reconcile=False)
    with httpx.stream("POST", f"{server.url}/agents/demo", json=body, timeout=30) as response:
        assert response.status_code == 200
        deadline = time.monotonic() + 30
        while effect_status(server, run_id, "step-1") != "started":
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        server.kill()
    server = server_factory(data_dir=data)

    page = context.new_page()
    page.goto(f"{server.url}/?thread={thread_id}")
    expect(page.get_by_test_id("run-status")).to_have_text("interrupted", timeout=WAIT_MS)
    card = page.get_by_test_id("interrupt")
    expect(card).to_have_count(1, timeout=WAIT_MS)
    expect(card).to_contain_text("search_docs")
    for answer in ("happened", "run-again", "fail-run"):
        expect(page.get_by_test_id(answer)).to_be_visible()
    expect(page.get_by_test_id("approve")).to_have_count(0)

    page.get_by_test_id("run-again").click()
    expect(page.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)
    expect(page.get_by_test_id("interrupt")).to_have_count(0)
    stored = _stored_thread(server.url, thread_id)
    assert stored["interrupts"] == []
    assert sum(effect_counts(server).values()) == 1, "the tool ran once, when told"
    _assert_matches_store(page, server.url, thread_id)


def test_the_inspector_counts_seqs_as_they_arrive_and_names_a_hydration(
    context: Any, module_server: ServerProcess
) -> None:
    from playwright.sync_api import expect

    _with_knobs(context, SLOW)
    page = context.new_page()
    page.goto(module_server.url + "/")
    thread_id = _send(page, "count as you go")
    _wait_for_text(page)
    shown = "() => document.querySelector('[data-testid=last-seq]').textContent"
    page.wait_for_function(f"() => /^[0-9]+$/.test(({shown})())", timeout=WAIT_MS)
    first = int(page.get_by_test_id("last-seq").text_content() or "")
    page.wait_for_function(f"n => Number(({shown})()) > n", arg=first, timeout=WAIT_MS)
    expect(page.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)
    runs = httpx.get(f"{module_server.url}/threads/{thread_id}/runs", timeout=10).json()["runs"]
    expect(page.get_by_test_id("last-seq")).to_have_text(str(runs[0]["lastSeq"]))

    # Reopened after the run: the hydration's frames say what they are, and carry no
    # run id of their own (the one they hold names no run).
    page.reload()
    hydration = page.get_by_test_id("hydration")
    expect(hydration.first).to_have_text("hydration: the thread as stored (no run of its own)",
                                         timeout=WAIT_MS)
    assert "not an event of a run" in (hydration.first.get_attribute("title") or "")
    started = page.locator("[data-testid=event-row][data-seq='']", has_text="RUN_STARTED")
    expect(started).to_have_count(1, timeout=WAIT_MS)
    assert runs[0]["runId"][:8] not in (started.text_content() or "")
