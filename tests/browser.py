"""Pages in headless Chromium, as a reviewer's browser shows them: the HTML report's charts
and the inertness of hostile values. Under CI the tests that need it must run, never skip
(.ci/run installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

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
