"""Debian's Chromium, driven by Playwright for Python (its sync API) on a thread of its own.

The gateway under test runs on the test's event loop; the browser's calls block, so each runs on
the one thread that owns the Playwright driver (`await browser.call(fn, ...)`), and the loop keeps
serving the page's requests meanwhile. Chromium is the system's (`/usr/bin/chromium`, or
MCPGW_CHROMIUM): Playwright downloads nothing. It starts once per test session, headless, with
a fresh profile and every background network feature off (this machine has no network).
Without Chromium the browser tests skip, unless MCPGW_REQUIRE_BROWSER=1 (set by `.ci/run`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from playwright.sync_api import BrowserContext, Page, Playwright, sync_playwright

T = TypeVar("T")

CHROMIUM = os.environ.get("MCPGW_CHROMIUM", "/usr/bin/chromium")
REQUIRE_ENV = "MCPGW_REQUIRE_BROWSER"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} is not installed (Debian: apt-get install chromium)"
    return None


class Browser:
    """One Chromium with a fresh profile; pages open in it and are driven on its thread."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="chromium")
        self._profile = tempfile.mkdtemp(prefix="mcpgw-chromium-")
        self._playwright: Playwright | None = None
        self.context: BrowserContext | None = None

    def start(self) -> None:
        self._thread.submit(self._start).result()

    def _start(self) -> None:
        self._playwright = sync_playwright().start()
        self.context = self._playwright.chromium.launch_persistent_context(
            self._profile, executable_path=CHROMIUM, args=list(FLAGS), headless=True, viewport=LAPTOP)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` on the browser's thread, without blocking the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    def open(self, url: str, viewport: dict[str, int] | None = None) -> Page:
        """A new tab (its own sessionStorage) at `url`; call it on the browser's thread."""
        assert self.context is not None
        page = self.context.new_page()
        page.set_viewport_size(viewport or LAPTOP)
        page.goto(url)
        return page

    def close(self) -> None:
        def stop() -> None:
            if self.context is not None:
                self.context.close()
            if self._playwright is not None:
                self._playwright.stop()

        try:
            self._thread.submit(stop).result(timeout=30)
        finally:
            self._thread.shutdown(wait=False)
            shutil.rmtree(self._profile, ignore_errors=True)
