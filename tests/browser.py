"""Pages in headless Chromium, as a reviewer's browser shows them: the HTML report's charts,
its case explorer clicked through, and the inertness of hostile values. Under CI the tests
that need it must run, never skip (.ci/run installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CONSOLE = re.compile(r"CONSOLE[:(]\d+\)?\] (.*)")


def open_in_chromium(page: Path, profile: Path) -> tuple[str, list[str]]:
    """The DOM after load and the console messages of ``page`` in headless Chromium."""
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, [m.group(1) for m in CONSOLE.finditer(done.stderr)]


@contextmanager
def chromium_page(console: list[str]) -> Iterator[Page]:
    """A page in headless Chromium driven by Playwright (the system browser: Playwright's
    own builds are never downloaded), to click, type and read the DOM as a reviewer
    would; each console message and page error is appended to ``console``."""
    from playwright.sync_api import sync_playwright  # a test dependency, for the tests that drive a page

    assert CHROMIUM is not None, "CI must have chromium: .ci/run installs it with apt-get"
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
            page.on("pageerror", lambda error: console.append(f"error: {error}"))
            yield page
        finally:
            browser.close()
