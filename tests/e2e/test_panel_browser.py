"""The inspector panel in a real headless Chromium (Debian's, driven by Playwright): what a person
does with it, against a real server and `memplane panel`, with memories written through the SDK.
Screenshots of the main pages are kept in .artifacts/panel/ (git-ignored)."""
from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from memplane import MemoryClient, MemoryStatus

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts" / "panel"
# As root Chromium needs --no-sandbox; the rest keep it off this machine's closed network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium (scripts/install_browser.py installs it "
           "with apt-get, as root)",
)

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (pip install -e '.[dev]')")
expect = sync_api.expect


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def signed_in(browser, panel: str, key: str):
    """A fresh browser context (its own cookies) signed in with key, on the memories page."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(f"{panel}/login")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/memories$"))
    return page


def owner(value: str, **extra) -> dict:
    return {"content": f"The order service is owned by {value}", "kind": "fact", "scope": "global",
            "entity": "order-service", "attribute": "owner", "value": value, "source_type": "ticket",
            "source_id": f"T-{value}", **extra}


@pytest.fixture(scope="module")
def tenant(panel_server, panel_tenant):
    """A tenant whose order service changed owner, with a lesson and a fact in Chinese."""
    _, writer, reader = panel_tenant()
    with MemoryClient(panel_server.target, writer) as client:
        client.write([owner("alice", confidence=0.9)])
        client.write([owner("bob", confidence=0.95),
                      {"content": "Deploys of the order service need the VPN on", "kind": "lesson", "scope": "global"},
                      {"content": "用户住在上海，喜欢喝乌龙茶", "kind": "fact", "scope": "global", "entity": "用户",
                       "attribute": "城市", "value": "上海"}])
    return writer, reader


def test_signing_in_lists_the_keys_memories(browser, panel, tenant):
    writer, _ = tenant
    page = signed_in(browser, panel, writer)
    expect(page.locator("table.memories")).to_contain_text("The order service is owned by bob")
    expect(page.locator("table.memories")).to_contain_text("Deploys of the order service need the VPN on")
    shot(page, "memories")
    page.context.close()


def test_an_entity_is_found_and_its_history_shows_values_sources_and_confidence(browser, panel, tenant):
    page = signed_in(browser, panel, tenant[1])
    page.get_by_role("link", name="Entities").click()
    page.get_by_label("Entity name contains").fill("order")
    page.get_by_role("button", name="Find").click()
    page.get_by_role("link", name="order-service", exact=True).click()
    timeline = page.locator("ol.timeline")
    expect(timeline.locator("li.entry")).to_have_count(3)  # alice created, then superseded by bob (created)
    expect(timeline).to_contain_text("owner = bob")
    expect(timeline).to_contain_text("owner = alice")
    expect(timeline).to_contain_text("confidence 0.95")
    expect(timeline).to_contain_text("source: ticket T-bob")
    expect(timeline.locator("li.action-superseded")).to_contain_text("owner = alice")
    shot(page, "history")
    page.context.close()


def test_a_search_hit_opens_its_explanation_with_channels_ranks_and_factors(browser, panel, tenant):
    page = signed_in(browser, panel, tenant[1])
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill("who owns the order service?")
    page.get_by_role("button", name="Apply").click()
    first = page.locator("li.hit").first
    expect(first.locator("a.content")).to_have_text("The order service is owned by bob")
    explanation = first.locator("details.explain table")
    expect(explanation).to_be_hidden()
    first.get_by_text("Why this hit").click()
    expect(explanation).to_be_visible()
    channels = explanation.locator("tr.channel")
    assert channels.count() >= 1
    assert {channels.nth(i).locator("td").first.inner_text() for i in range(channels.count())} & {"vector", "keyword"}
    expect(explanation.locator("tr.factor")).to_contain_text(["rrf"])
    shot(page, "search")
    page.context.close()


def test_chinese_memories_are_shown_and_found(browser, panel, tenant):
    page = signed_in(browser, panel, tenant[1])
    page.goto(f"{panel}/search?q=用户住在哪里")
    expect(page.locator("li.hit a.content").first).to_have_text("用户住在上海，喜欢喝乌龙茶")
    page.goto(f"{panel}/history?entity=用户")
    expect(page.locator("ol.timeline")).to_contain_text("城市 = 上海")
    page.context.close()


def test_a_memory_written_through_the_sdk_appears_live(browser, panel, panel_server, tenant):
    writer, reader = tenant
    page = signed_in(browser, panel, reader)
    page.get_by_role("link", name="Live").click()
    expect(page.locator("#live-status")).to_have_text("live")
    marker = uuid.uuid4().hex[:8]
    with MemoryClient(panel_server.target, writer) as client:
        written = client.write_one(f"Release {marker} is frozen until Friday", kind="event", scope="global",
                                   session_id="release-chat")
    row = page.locator(f'tr[data-memory-id="{written.id}"]')
    expect(row).to_contain_text(f"Release {marker} is frozen until Friday")
    expect(row).to_contain_text("created")
    expect(row).to_contain_text("release-chat")
    shot(page, "live")
    page.context.close()


def test_a_memory_seen_live_is_forgotten_from_the_ui_after_confirmation(browser, panel, panel_server, tenant):
    writer, _ = tenant
    live = signed_in(browser, panel, writer)
    live.goto(f"{panel}/live")
    expect(live.locator("#live-status")).to_have_text("live")
    with MemoryClient(panel_server.target, writer) as client:
        memory = client.write_one("The old wiki lives at wiki-old.internal", kind="fact", scope="global")
        arrived = live.locator(f'tr.change-created[data-memory-id="{memory.id}"]')
        # Opened beside the live page (same session), which stays open to show the forget arrive.
        page = live.context.new_page()
        page.goto(panel + arrived.get_by_role("link").get_attribute("href"))
        page.get_by_role("button", name="Forget…").click()
        expect(page.get_by_role("heading")).to_have_text("Forget this memory?")
        shot(page, "confirm-forget")
        assert client.get_memory(memory.id).status is MemoryStatus.ACTIVE  # asking changed nothing
        page.get_by_role("button", name="Yes, forget it").click()
        expect(page.locator("p.done")).to_have_text("Forgotten.")
        assert client.get_memory(memory.id).status is MemoryStatus.DELETED
    expect(page.locator("table.memories")).not_to_contain_text("wiki-old.internal")
    expect(live.locator(f'tr.change-forgotten[data-memory-id="{memory.id}"]')).to_be_visible()
    live.context.close()


def test_correcting_from_the_ui_shows_the_change_then_makes_it(browser, panel, panel_server, tenant):
    writer, _ = tenant
    with MemoryClient(panel_server.target, writer) as client:
        memory = client.write_one("The on-call phone is 555-0100", kind="fact", scope="global")
        page = signed_in(browser, panel, writer)
        page.goto(f"{panel}/memories/{memory.id}")
        page.get_by_label("Content").fill("The on-call phone is 555-0199")
        page.get_by_role("button", name="Review correction…").click()
        expect(page.locator("table.diff td.new")).to_have_text("The on-call phone is 555-0199")
        assert client.get_memory(memory.id).content == "The on-call phone is 555-0100"
        page.get_by_role("button", name="Yes, correct it").click()
        expect(page.locator("p.done")).to_have_text("Corrected.")
        assert client.get_memory(memory.id).content == "The on-call phone is 555-0199"
    page.context.close()


def test_a_conflict_is_resolved_after_confirmation(browser, panel, panel_server, panel_tenant):
    _, writer, _ = panel_tenant()
    office = lambda city: {"content": f"The office is in {city}", "kind": "fact", "scope": "global",  # noqa: E731
                           "entity": "office", "attribute": "city", "value": city}
    with MemoryClient(panel_server.target, writer, agent_id="a1") as a1, \
            MemoryClient(panel_server.target, writer, agent_id="a2") as a2:
        [current] = a1.write([office("Berlin")]).memories
        [challenger] = a2.write([office("Munich")]).memories
        page = signed_in(browser, panel, writer)
        page.get_by_role("link", name="Conflicts & stale").click()
        row = page.locator("table.conflicts tbody tr")
        expect(row).to_contain_text("agents a1 and a2 disagree")
        shot(page, "review")
        row.get_by_role("button", name="Keep challenger…").click()
        expect(page.locator(".kept")).to_have_text("Munich")
        page.get_by_role("button", name="Yes, keep the challenger value").click()
        expect(page.locator("p.done")).to_have_text("Conflict resolved.")
        expect(page.locator("table.conflicts")).to_contain_text("No open conflicts.")
        assert a1.get_memory(challenger.id).status is MemoryStatus.ACTIVE
        assert a1.get_memory(current.id).status is MemoryStatus.SUPERSEDED
    page.context.close()


def test_a_stale_summary_is_listed(browser, panel, panel_server, panel_tenant):
    _, writer, _ = panel_tenant()
    city = lambda value: {"content": f"The user lives in {value}", "kind": "fact", "scope": "global",  # noqa: E731
                          "entity": "user", "attribute": "city", "value": value, "session_id": "chat-1"}
    with MemoryClient(panel_server.target, writer) as client:
        client.write([city("Guangzhou")])
        summary = client.reflect(session_id="chat-1").memories[-1]
        client.write([city("Shenzhen")])
        assert client.get_memory(summary.id).status is MemoryStatus.STALE
    page = signed_in(browser, panel, writer)
    page.goto(f"{panel}/review")
    expect(page.locator(f'tr[data-memory-id="{summary.id}"]')).to_contain_text("stale")
    page.context.close()


def test_the_working_memory_of_a_live_session_is_shown(browser, panel, panel_server, tenant):
    writer, _ = tenant
    with MemoryClient(panel_server.target, writer) as client:
        client.write([{"content": "step 2 of 5: migrating the schema", "kind": "event", "layer": "working",
                       "session_id": "deploy-42", "state_key": "step"},
                      {"content": "the user asked to keep the old index", "kind": "turn", "layer": "working",
                       "session_id": "deploy-42"}])
    page = signed_in(browser, panel, writer)
    page.goto(f"{panel}/working")
    page.get_by_label("Session").fill("deploy-42")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("table.state")).to_contain_text("step 2 of 5: migrating the schema")
    expect(page.locator("ol.items")).to_contain_text("the user asked to keep the old index")
    shot(page, "working")
    page.context.close()


def test_another_tenants_key_sees_none_of_the_first_tenants_memories(browser, panel, panel_server, panel_tenant,
                                                                       tenant):
    writer, _ = tenant
    _, other_writer, other_reader = panel_tenant()
    with MemoryClient(panel_server.target, writer) as client:
        [theirs] = client.list_memories(entity="order-service").items
    page = signed_in(browser, panel, other_reader)
    expect(page.locator("table.memories")).to_contain_text("No memories.")
    page.goto(f"{panel}/search?q=who+owns+the+order+service")
    expect(page.locator("ol.hits")).to_contain_text("No hits.")
    page.goto(f"{panel}/history?entity=order-service")
    expect(page.locator("ol.timeline")).to_contain_text("No recorded changes.")
    page.goto(f"{panel}/entities?q=order")
    expect(page.locator("ul.entities")).not_to_contain_text("order-service")
    # Their memory by id, through every panel URL that takes one: as if it did not exist.
    response = page.goto(f"{panel}/memories/{theirs.id}")
    assert response.status == 404
    expect(page.locator("body")).not_to_contain_text("bob")
    for action in ("forget", "correct"):
        form = page.request.post(f"{panel}/memories/{theirs.id}/{action}", headers={"origin": panel},
                                 form={"csrf": csrf_of(page), "content": "taken over"})
        assert form.status == 404 and "bob" not in form.text()
    # Live: the other tenant's new memory never shows, their own does.
    page.goto(f"{panel}/live")
    expect(page.locator("#live-status")).to_have_text("live")
    with MemoryClient(panel_server.target, writer) as first, MemoryClient(panel_server.target, other_writer) as second:
        hidden = first.write_one("The order service moves to cluster east", kind="event", scope="global")
        shown = second.write_one("Our own release is on Monday", kind="event", scope="global")
    expect(page.locator(f'tr[data-memory-id="{shown.id}"]')).to_be_visible()
    expect(page.locator(f'tr[data-memory-id="{hidden.id}"]')).to_have_count(0)
    with MemoryClient(panel_server.target, writer) as client:
        assert client.get_memory(theirs.id).status is MemoryStatus.ACTIVE
    page.context.close()


def csrf_of(page) -> str:
    return page.locator('input[name="csrf"]').first.get_attribute("value")


HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>"\'><b>bold</b>'


def test_hostile_memory_content_is_shown_as_text_and_never_runs(browser, panel, panel_server, panel_tenant):
    _, writer, _ = panel_tenant()
    page = signed_in(browser, panel, writer)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{panel}/live")
    expect(page.locator("#live-status")).to_have_text("live")
    with MemoryClient(panel_server.target, writer) as client:
        memory = client.write_one(
            HOSTILE + " alert", kind="fact", scope="global", entity=HOSTILE, attribute="a<b", value=HOSTILE,
            session_id='"><svg onload=alert(1)>', tags=["<i>x</i>"],
        )
    expect(page.locator(f'tr[data-memory-id="{memory.id}"]')).to_contain_text(HOSTILE + " alert")
    for url in ("/memories", f"/memories/{memory.id}", "/search?q=alert+img+script",
                "/history?entity=" + HOSTILE, "/entities?q=img"):
        page.goto(panel + url, wait_until="load")
        expect(page.locator("main")).to_contain_text(HOSTILE)
        assert page.evaluate("window.__pwned") is None, url
        assert page.locator("main b, main img, main script, main svg").count() == 0, url
    assert dialogs == []
    page.context.close()
