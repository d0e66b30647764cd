"""Headless Debian chromium through playwright for the UI tests (never ``playwright install``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support import REPO

CHROMIUM = os.environ.get("MVSINK_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
UI_TIMEOUT_MS = 60_000  # a loaded machine renders the UI slowly: playwright's expect defaults to 5 s


def artifacts_dir(*stale: str) -> Path:
    """The screenshots folder (``MVSINK_TEST_ARTIFACTS``/browser), without a test's old files (glob patterns)."""
    folder = Path(os.environ.get("MVSINK_TEST_ARTIFACTS", REPO / "test-artifacts")) / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    for pattern in stale:
        for old in folder.glob(pattern):
            old.unlink(missing_ok=True)
    return folder


@contextmanager
def browser_page(*, width: int, height: int) -> Iterator[Any]:
    """A new page in headless chromium; the browser closes when the block ends."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=UI_TIMEOUT_MS)
    assert Path(CHROMIUM).exists(), (
        f"{CHROMIUM} is missing. Fix: apt-get install -y --no-install-recommends chromium "
        "(.ci/run does it), or point MVSINK_CHROMIUM at a Chromium binary."
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        try:
            yield page
        finally:
            context.close()
            browser.close()
