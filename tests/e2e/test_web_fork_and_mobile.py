"""The web client's fork actions and its phone layout, in headless Chromium.

"Edit and regenerate" forks just before a user message and runs the edited text on
the fork; "Branch from here" forks at the end of a turn. On a 390x844 screen the
thread list and "New thread" live in a drawer behind the menu button. The harness
(real ``outlast serve``, Debian's Chromium) is the one of ``test_web_client.py``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from tests.e2e import test_web_client as harness
from tests.e2e.test_web_client import (
    QUICK,
    WAIT_MS,
    _assert_matches_store,
    _run_until_interrupted,
    _send,
    _stored_thread,
    _thread_id,
    _with_knobs,
)
from tests.support.server import ServerProcess

# The harness's fixtures (Chromium, a real ``outlast serve``), used here by name.
browser = harness.browser
context = harness.context

pytestmark = pytest.mark.browser

SERVER_ARGS: tuple[str, ...] = ()  # the module's shared server, as the harness runs it


@pytest.fixture(scope="module")
def server_url(module_server: ServerProcess) -> str:
    """The base URL of the module's shared ``outlast serve``."""
    return module_server.url

PHONE = {"width": 390, "height": 844}


def _users(thread: dict[str, Any]) -> list[str]:
    return [m["content"] for m in thread["messages"] if m["role"] == "user"]


def _settled(page: Any, server_url: str, thread_id: str) -> None:
    """Once the thread's run has ended in the store, the page shows exactly the stored
    messages (a status on the page can still be the previous run's when a fork opens)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while True:
        idle = _stored_thread(server_url, thread_id).get("activeRun") is None
        try:
            if idle:
                _assert_matches_store(page, server_url, thread_id)
                return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"the run of thread {thread_id} did not end in time")
        time.sleep(0.1)


def _finished(page: Any) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_test_id("run-status")).to_have_text("succeeded", timeout=WAIT_MS)


def test_edit_and_regenerate_runs_the_edit_on_a_fork(context: Any, server_url: str) -> None:
    from playwright.sync_api import expect

    _with_knobs(context, {**QUICK, "steps": 1, "step_delay_ms": 50})
    page = context.new_page()
    page.goto(server_url + "/")
    original = _send(page, "first question")
    _finished(page)
    page.get_by_test_id("composer").fill("second question")
    page.get_by_test_id("send").click()
    expect(page.locator("[data-testid=message][data-role=user]")).to_have_count(2,
                                                                                timeout=WAIT_MS)
    _finished(page)

    second = page.locator("[data-testid=message][data-role=user]").nth(1)
    second.get_by_test_id("edit-message").click()
    expect(page.get_by_test_id("editing")).to_be_visible()
    composer = page.get_by_test_id("composer")
    expect(composer).to_have_value("second question")
    composer.fill("second question, edited")
    page.get_by_test_id("send").click()

    page.wait_for_url(lambda url: original not in url, timeout=WAIT_MS)
    forked = _thread_id(page)
    _finished(page)
    expect(page.locator("[data-testid=message][data-role=user] .content")).to_have_text(
        ["first question", "second question, edited"], timeout=WAIT_MS)
    expect(page.get_by_test_id("editing")).to_be_hidden()
    _settled(page, server_url, forked)
    fork_view = _stored_thread(server_url, forked)
    assert fork_view["forkedFrom"]["threadId"] == original
    assert _users(fork_view) == ["first question", "second question, edited"]
    # The original keeps both questions as they were asked.
    assert _users(_stored_thread(server_url, original)) == ["first question", "second question"]

    # Branch from the end of the first turn: the branch holds that turn only.
    page.goto(f"{server_url}/?thread={original}")
    _finished(page)
    ends = page.get_by_test_id("branch-here")
    expect(ends).to_have_count(2, timeout=WAIT_MS)
    ends.first.click()
    page.wait_for_url(lambda url: original not in url and forked not in url, timeout=WAIT_MS)
    branch = _thread_id(page)
    expect(page.locator("[data-testid=message][data-role=user] .content")).to_have_text(
        ["first question"], timeout=WAIT_MS)
    _settled(page, server_url, branch)
    assert _stored_thread(server_url, branch)["forkedFrom"]["threadId"] == original


def test_the_phone_layout_reaches_threads_new_thread_and_approvals(
        browser: Any, server_url: str, tmp_path: Any) -> None:
    from playwright.sync_api import expect

    waiting = str(uuid.uuid4())
    _run_until_interrupted(server_url, waiting)
    ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                              has_touch=True)
    try:
        _with_knobs(ctx, QUICK)
        page = ctx.new_page()
        page.goto(f"{server_url}/?thread={waiting}")
        # The thread and its approval fill the screen; the list waits behind the menu.
        approve = page.get_by_test_id("approve")
        expect(approve).to_be_visible(timeout=WAIT_MS)
        expect(approve).to_be_in_viewport()
        sidebar = page.get_by_test_id("sidebar")
        expect(sidebar).not_to_be_in_viewport()
        page.screenshot(path=str(tmp_path / "phone-thread.png"))

        page.get_by_test_id("menu").click()
        expect(sidebar).to_be_in_viewport(ratio=0.9)
        link = page.locator(f"[data-testid=thread-link][data-thread-id='{waiting}']")
        expect(link).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_test_id("new-thread")).to_be_in_viewport()
        page.screenshot(path=str(tmp_path / "phone-drawer.png"))
        # The backdrop closes it; so does choosing something in it.
        page.get_by_test_id("drawer-backdrop").click(position={"x": 370, "y": 400})
        expect(sidebar).not_to_be_in_viewport()

        page.get_by_test_id("menu").click()
        page.get_by_test_id("new-thread").click()
        expect(sidebar).not_to_be_in_viewport()
        expect(page.locator("#thread-title")).to_have_text("New thread")
        expect(page.get_by_test_id("message")).to_have_count(0)
        fresh = _send(page, "a quick job from the phone")
        assert fresh != waiting
        _finished(page)

        page.get_by_test_id("menu").click()
        link.click()
        expect(sidebar).not_to_be_in_viewport()
        page.wait_for_url(f"**/?thread={waiting}", timeout=WAIT_MS)
        expect(approve).to_be_in_viewport(timeout=WAIT_MS)
        approve.click()
        _finished(page)
        _assert_matches_store(page, server_url, waiting)
        assert _stored_thread(server_url, waiting)["interrupts"] == []
        threads = httpx.get(f"{server_url}/threads", timeout=10).json()["threads"]
        assert {fresh, waiting} <= {t["threadId"] for t in threads}
        page.screenshot(path=str(tmp_path / "phone-done.png"))
    finally:
        ctx.close()
