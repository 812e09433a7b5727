"""`make screenshots`: the status page's main views, as PNG files for the docs and the README.

Runs a real gateway (the browser tests' config: stdio calc and clock, plus the demo notes and an
HTTP backend nobody serves), sends it half a minute of traffic from the official SDK client
(calls, tool errors, a slow call, a tenant over its rate limit), applies one reload and refuses
another, then has Debian's Chromium take each view on a laptop screen and the backends on a phone.

    python tests/browser/screenshots.py [OUTPUT_FOLDER]     (default: docs/assets/status)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))  # before tests/browser: `conftest` is the suite's own

import aiohttp  # noqa: E402
import yaml  # noqa: E402
from aiohttp import web  # noqa: E402
from conftest import MCP_HEADERS, sdk_client  # noqa: E402
from playwright.sync_api import Page, expect  # noqa: E402

from browser.chromium import PHONE, Browser, chromium_missing  # noqa: E402
from browser.served import ADMIN_KEY, GLOBEX_KEY, gateway_config  # noqa: E402
from gateway import keys  # noqa: E402
from gateway.app import create_app  # noqa: E402
from gateway.config import load_config  # noqa: E402
from gateway.metrics.tally import reader  # noqa: E402
from gateway.metrics.window import TrafficWindow  # noqa: E402

DEFAULT_FOLDER = TESTS.parent / "docs" / "assets" / "status"
TRAFFIC_SECONDS = 30
VIEWS = ("backends", "tenants", "catalogue", "reloads")


def config(folder: Path, **options: object) -> dict[str, object]:
    raw = gateway_config(folder, **options)  # type: ignore[arg-type]
    raw["backends"] += [  # type: ignore[operator]
        {"name": "notes", "transport": "stdio", "command": [sys.executable, "-m", "gateway.demo.notes"]},
        {"name": "search", "transport": "http", "url": "http://127.0.0.1:9/mcp", "timeout_seconds": 2},
    ]
    return raw


async def traffic(base: str) -> None:
    """Calls of varying pace, some tool errors and one slow call; globex past its rate limit."""
    async with sdk_client(f"{base}/mcp", ADMIN_KEY) as client, aiohttp.ClientSession() as http:
        slow = asyncio.ensure_future(client.call_tool("calc__slow", {"seconds": 1.5}))
        for second in range(TRAFFIC_SECONDS):
            for n in range(1 + (second * 7) % 5):
                await client.call_tool("calc__add", {"a": n, "b": second})
            await client.call_tool("clock__now", {"timezone": "Europe/Paris"})
            if second % 6 == 0:
                await client.call_tool("calc__evaluate", {"expression": "1/0"})
                await client.call_tool("notes__create_note", {"title": f"note {second}", "body": "status page"})
            await asyncio.sleep(1)
        await slow
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for _ in range(6):  # a burst of 3, then 429s
            await (await http.post(f"{base}/mcp", json=ping,
                                   headers={**MCP_HEADERS, "Authorization": f"Bearer {GLOBEX_KEY}"})).read()


def write(path: Path, raw: dict[str, object]) -> None:
    path.write_text(yaml.safe_dump(raw))


async def reloads(base: str, path: Path, folder: Path) -> None:
    """One reload applied (globex's session budget), one refused (a restart-only key)."""
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession() as http:
        for raw in (config(folder, globex_sessions=8), {**config(folder), "server": {"port": 1}}):
            await asyncio.to_thread(write, path, raw)
            await (await http.post(f"{base}/admin/reload", headers=admin)).read()


def shoot(browser: Browser, page_url: str, out: Path) -> None:
    page = browser.open(f"{page_url}#backends")
    page.fill("#token", ADMIN_KEY)
    page.press("#token", "Enter")
    expect(page.locator("#backends-table tbody tr")).to_have_count(4)
    for view in VIEWS:
        page.click(f'a[data-view="{view}"]')
        expect(page.locator(f"#view-{view} tbody tr").first).to_be_visible()
        if view == "catalogue":  # one caller's view: only group ops is listed clock__convert
            page.fill("#caller-subject", "alice")
            page.fill("#caller-groups", "ops")
            page.fill("#catalogue-query", "clock")
            expect(page.locator("#catalogue-count")).to_contain_text("as alice in ops matching")
        page.wait_for_timeout(500)  # the sparklines and counts of this poll drawn
        _save(page, out / f"{view}.png")
    page.set_viewport_size(PHONE)
    page.click('a[data-view="backends"]')
    page.wait_for_timeout(500)
    _save(page, out / "phone-backends.png", full=False)
    page.close()


def _save(page: Page, path: Path, full: bool = True) -> None:
    page.screenshot(path=str(path), full_page=full)
    print(f"wrote {path}")


async def main(out: Path) -> int:
    missing = chromium_missing()
    if missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mcpgw-screens-") as tmp:
        folder = Path(tmp)
        path = folder / "gateway.yaml"
        await asyncio.to_thread(write, path, config(folder))
        app = create_app(load_config(path, {}), reload_source=lambda: load_config(path, {}))
        app[keys.TRAFFIC] = TrafficWindow(reader(app[keys.METRICS]), every=2.0)  # a finer series for the pictures
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        browser = Browser()
        try:
            await asyncio.wait_for(app[keys.CATALOGUE].ready.wait(), 60)
            await traffic(base)
            await reloads(base, path, folder)
            await asyncio.to_thread(browser.start)
            await browser.call(shoot, browser, f"{base}/admin/", out)
        finally:
            browser.close()
            await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_FOLDER)))
