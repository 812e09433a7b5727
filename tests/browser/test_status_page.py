"""The status page at /admin/ in headless Chromium, against a real gateway with real stdio backends.

Issue 31, item 2: it asks for the token and keeps it for the tab only, refuses what is not an
admin's, shows a backend going down within seconds, and its numbers are those of the admin JSON
and of /metrics; it is usable with the keyboard alone and on a phone, and shows what backends say
as text, never as markup.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
import yaml
from conftest import sdk_client
from observability.helpers import sample
from playwright.sync_api import Locator, Page, expect

from browser.chromium import PHONE, Browser
from browser.served import ADMIN_KEY, GLOBEX_KEY, StatusGateway, gateway_config

pytestmark = pytest.mark.timeout(90)

POLL_SECONDS = 3  # the page's own interval (app.js POLL_MS)
SOON_MS = (POLL_SECONDS + 4) * 1000
"""What "within seconds" means here: one poll after the gateway knows, with room for a loaded machine."""


def signed_in(browser: Browser, gateway: StatusGateway, view: str = "backends",
              viewport: dict[str, int] | None = None) -> Page:
    page = browser.open(f"{gateway.page}#{view}", viewport)
    page.fill("#token", ADMIN_KEY)
    page.press("#token", "Enter")
    expect(page.locator("#app")).to_be_visible()
    return page


def cell(page: Page, table: str, key: str, row: str, field: str) -> Locator:
    return page.locator(f'#{table}-table tr[data-{key}="{row}"] [data-field="{field}"]')


def backend(page: Page, name: str, field: str) -> Locator:
    return cell(page, "backends", "backend", name, field)


def tenant(page: Page, name: str, field: str) -> Locator:
    return cell(page, "tenants", "tenant", name, field)


async def test_the_page_asks_for_a_token_refuses_others_and_keeps_an_admins_for_the_tab_only(
        browser: Browser, status_gateway: Any) -> None:
    gateway = await status_gateway()

    def visit() -> None:
        page = browser.open(gateway.page)
        response = page.request.get(gateway.page)
        assert "script-src 'self'" in response.headers["content-security-policy"]
        expect(page.locator("#login")).to_be_visible()
        expect(page.locator("#app")).to_be_hidden()
        assert page.evaluate("fetch('status').then(r => r.status)") == 401  # the data needs the token
        for token, why in (("not-a-token", "is missing, expired or not valid here"),
                           (GLOBEX_KEY, "lacks the admin scope")):
            page.fill("#token", token)
            page.press("#token", "Enter")
            expect(page.locator("#login-error")).to_contain_text(f"Refused: the token {why}")
            expect(page.locator("#app")).to_be_hidden()
            assert page.evaluate("sessionStorage.length") == 0
        page.fill("#token", ADMIN_KEY)
        page.press("#token", "Enter")
        expect(backend(page, "calc", "state")).to_contain_text("up")
        expect(page.locator("#summary")).to_contain_text("ready")
        page.reload()  # the same tab keeps it
        expect(backend(page, "clock", "state")).to_contain_text("up")
        other = browser.open(gateway.page)  # another tab asks again
        expect(other.locator("#login")).to_be_visible()
        other.close()
        page.click("#signout")
        expect(page.locator("#login")).to_be_visible()
        assert page.evaluate("sessionStorage.getItem('mcpgw.admin.token')") is None
        page.close()

    await browser.call(visit)


async def test_a_backend_going_down_shows_within_seconds_and_so_does_its_return(
        browser: Browser, status_gateway: Any) -> None:
    gateway = await status_gateway()
    page = await browser.call(signed_in, browser, gateway)
    await browser.call(expect(backend(page, "calc", "state")).to_contain_text, "up")
    pid = next(row["pid"] for row in (await gateway.admin("/admin/backends"))["backends"] if row["name"] == "calc")

    gateway.hold_calc_down(True)
    os.kill(pid, signal.SIGKILL)  # a crash; it cannot start again while held down
    loop = asyncio.get_running_loop()
    killed = loop.time()
    await browser.call(lambda: expect(backend(page, "calc", "state")).to_contain_text("down", timeout=SOON_MS))
    assert loop.time() - killed < SOON_MS / 1000
    await browser.call(expect(backend(page, "calc", "state")).to_contain_text, "process not running")
    await browser.call(expect(page.locator("#summary")).to_contain_text, "1 down")
    await browser.call(expect(backend(page, "clock", "state")).to_contain_text, "up")

    gateway.hold_calc_down(False)
    await browser.call(lambda: expect(backend(page, "calc", "state")).to_contain_text("up", timeout=30_000))
    restarts = sample(await gateway.metrics(), "mcpgw_backend_restarts_total", backend="calc")
    assert restarts >= 1
    await browser.call(lambda: expect(backend(page, "calc", "restarts")).to_have_text(str(int(restarts)),
                                                                                       timeout=SOON_MS))
    await browser.call(page.close)


async def test_its_numbers_are_those_of_the_admin_json_and_of_the_metrics(
        browser: Browser, status_gateway: Any, raw_client: Any) -> None:
    gateway = await status_gateway()
    globex = raw_client(gateway.mcp, GLOBEX_KEY)
    assert [(await globex.post(globex.request("ping")))[0] for _ in range(5)].count(429) == 2  # a burst of 3
    async with sdk_client(gateway.mcp, ADMIN_KEY) as client:
        for n in range(5):
            await client.call_tool("calc__add", {"a": n, "b": 2})
        await client.call_tool("calc__evaluate", {"expression": "1/0"})  # a tool error
        await client.call_tool("clock__now", {"timezone": "UTC"})
        page = await browser.call(signed_in, browser, gateway)
        calls = backend(page, "calc", "calls_per_second").locator("[data-value]").last
        await browser.call(lambda: expect(calls).to_have_attribute("data-value", "6", timeout=SOON_MS))
        body, samples = await gateway.admin("/admin/backends"), await gateway.metrics()
        for row in body["backends"]:
            await browser.call(_backend_matches, page, row, samples)

        await browser.call(page.click, 'a[data-view="tenants"]')
        acme = tenant(page, "acme", "sessions")
        await browser.call(lambda: expect(acme).to_have_text("1 / 20", timeout=SOON_MS))  # this SDK session
        tenants, samples = await gateway.admin("/admin/tenants"), await gateway.metrics()
        for row in tenants["tenants"]:
            await browser.call(_tenant_matches, page, row, samples)
    await browser.call(page.close)


def _backend_matches(page: Page, row: dict[str, Any], samples: dict[Any, float]) -> None:
    traffic, name = row["traffic"], row["name"]
    counted = sum(value for (metric, labels), value in samples.items()
                  if metric == "mcpgw_tool_calls_total" and ("backend", name) in labels)
    assert traffic["calls"] == traffic["totals"]["calls"] == counted  # the gateway started within the window
    expect(backend(page, name, "calls_per_second").locator("[data-value]").last).to_have_attribute(
        "data-value", str(traffic["calls"]))
    for field in ("p50_ms", "p95_ms", "error_rate"):
        shown = backend(page, name, field).locator("[data-value]").first
        expected = traffic[field]
        expect(shown).to_have_attribute("data-value", "" if expected is None else _js(expected))
    expect(backend(page, name, "restarts")).to_have_text(
        str(int(sample(samples, "mcpgw_backend_restarts_total", backend=name))))
    expect(backend(page, name, "items")).to_contain_text(f"{row['tools']} tools")
    expect(backend(page, name, "era")).to_have_text(f"handshake ({row['protocol_version']})")


def _tenant_matches(page: Page, row: dict[str, Any], samples: dict[Any, float]) -> None:
    name, traffic = row["name"], row["traffic"]
    limited = sample(samples, "mcpgw_rate_limited_total", tenant=name)
    assert traffic["totals"]["rate_limited"] == traffic["rate_limited"] == limited
    shown = tenant(page, name, "rate_limited").locator("[data-value]")
    expect(shown.first).to_have_attribute("data-value", str(int(limited)))
    expect(shown.last).to_have_text(f"{int(limited)} since start")
    expect(tenant(page, name, "in_flight")).to_have_text(f"{row['in_flight']:,} / {row['limits']['in_flight']:,}")
    rate = row["rate_limit"]
    expect(tenant(page, name, "requests_per_second")).to_contain_text(
        "no rate limit" if rate is None else f"burst {rate['burst']}")


def _js(number: float) -> str:
    """A number as JavaScript writes it into an attribute (String(n))."""
    return str(int(number)) if float(number).is_integer() else repr(float(number))


async def test_the_catalogue_by_keyboard_alone_and_what_backends_say_shows_as_text(
        browser: Browser, status_gateway: Any) -> None:
    gateway = await status_gateway(hostile=True)

    def browse() -> None:
        page = signed_in(browser, gateway)
        page.focus('a[data-view="backends"]')
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        expect(page.locator('a[data-view="catalogue"]')).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#catalogue-title")).to_be_focused()
        expect(page.locator("#catalogue-count")).to_contain_text("13 items for acme")
        page.keyboard.press("Tab")
        expect(page.locator("#catalogue-tenant")).to_be_focused()
        page.keyboard.press("ArrowDown")  # globex
        expect(page.locator("#catalogue-count")).to_contain_text("12 items for globex")
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        expect(page.locator("#catalogue-query")).to_be_focused()
        page.keyboard.type("return a +")
        expect(page.locator("#catalogue-table tbody tr")).to_have_count(1)
        expect(cell(page, "catalogue", "item", "calc__add", "original")).to_have_text("add")

        page.select_option("#catalogue-tenant", "acme")
        page.fill("#catalogue-query", "echo")
        row = page.locator('#catalogue-table tr[data-item="hostile__echo"]')
        expect(row).to_contain_text('<img src=x onerror="window.pwned = 1">')
        expect(row).to_contain_text("<script>window.pwned = 2</script><b>not bold</b>")
        assert page.locator("#catalogue-table img, #catalogue-table script, #catalogue-table b").count() == 0
        assert page.evaluate("window.pwned") is None

        page.fill("#catalogue-query", "clock__")  # 3 tools and a prompt; then as one caller, under the rules
        expect(page.locator("#catalogue-count")).to_contain_text("4 items for acme matching")
        page.fill("#caller-subject", "alice")
        expect(page.locator("#catalogue-count")).to_contain_text("3 items for acme as alice matching")
        expect(cell(page, "catalogue", "item", "clock__now", "rule")).to_have_text("the default")
        page.fill("#caller-groups", "dev, ops")
        expect(page.locator("#catalogue-count")).to_contain_text("4 items for acme as alice in dev, ops matching")
        expect(cell(page, "catalogue", "item", "clock__convert", "rule")).to_have_text("rule ops-convert")
        page.close()

    await browser.call(browse)


async def test_every_view_fits_a_phone_and_a_laptop(browser: Browser, status_gateway: Any) -> None:
    gateway = await status_gateway()

    def look() -> None:
        for viewport in (PHONE, {"width": 1280, "height": 800}):
            page = signed_in(browser, gateway, viewport=viewport)
            for view, title in (("backends", "Backends"), ("tenants", "Tenants"), ("catalogue", "Catalogue"),
                                ("reloads", "Reloads and replicas")):
                page.click(f'a[data-view="{view}"]')
                expect(page.locator(f"#{view}-title")).to_have_text(title)
                expect(page.locator(f"#view-{view} tbody tr").first).to_be_visible()
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= viewport["width"], (view, width)
            cards = page.evaluate("getComputedStyle(document.querySelector('#reloads-table td')).display")
            label = page.evaluate("getComputedStyle(document.querySelector('#reloads-table td'), '::before').content")
            if viewport is PHONE:  # rows become cards, each cell labelled
                assert (cards, label) == ("grid", '"Replica"')
            else:
                assert (cards, label) == ("table-cell", "none")
            page.close()

    await browser.call(look)


async def test_a_reload_from_the_page_is_listed_with_who_and_what_changed_and_so_is_a_refusal(
        browser: Browser, status_gateway: Any) -> None:
    gateway = await status_gateway()
    page = await browser.call(signed_in, browser, gateway, "reloads")
    await browser.call(expect(page.locator("#reloads-table tbody tr")).to_have_count, 1)  # the start
    started = (await gateway.admin("/admin/reloads"))["config_version"]

    gateway.config_path.write_text(yaml.safe_dump(gateway_config(gateway.folder, globex_sessions=2)))
    await browser.call(page.click, "#reload")
    await browser.call(expect(page.locator("#reload-result")).to_contain_text, "Applied: config ")
    now = (await gateway.admin("/admin/status"))["gateway"]["config_version"]
    assert now != started

    def applied() -> None:
        expect(page.locator("#reload-result")).to_have_text(f"Applied: config {now}.")
        newest = page.locator("#reloads-table tbody tr").first
        expect(newest.locator('[data-field="status"]')).to_have_text("applied")
        expect(newest.locator('[data-field="by"]')).to_have_text("ci-bot (acme)")
        expect(newest.locator('[data-field="changed"]')).to_contain_text("tenants: globex")
        expect(newest.locator('[data-field="changed"]')).to_contain_text("keys: tenants.globex.limits.sessions")
        expect(newest.locator('[data-field="config"]')).to_have_text(f"{started} → {now}")
        expect(page.locator("#config-version")).to_contain_text(f"config {now}")
        expect(page.locator('#replicas-table [data-field="config_version"]')).to_have_text(now)

    await browser.call(applied)
    gateway.config_path.write_text("tenants: [unclosed")
    await browser.call(page.click, "#reload")

    def rejected() -> None:
        expect(page.locator("#reload-result")).to_contain_text("Rejected: ")
        newest = page.locator("#reloads-table tbody tr").first
        expect(newest.locator('[data-field="status"]')).to_contain_text("rejected")
        expect(newest.locator('[data-field="status"]')).to_contain_text("not valid YAML")
        expect(newest.locator('[data-field="changed"]')).to_have_text("nothing (the old config goes on)")
        expect(page.locator("#reloads-table tbody tr")).to_have_count(3)
        page.close()

    await browser.call(rejected)
