"""Test support for the web console: Debian's Chromium driven by Playwright's Python
package (``executable_path``: no browser download). Without the browser the tests
fail, unless ORCHMEM_NO_BROWSER=1 says this machine has none (CI never sets it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("ORCHMEM_CHROMIUM", "/usr/bin/chromium")


def chromium_or_skip() -> str:
    """The browser's path; a skip only where ORCHMEM_NO_BROWSER=1, else a failure."""
    found = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    missing = None
    if found is None:
        missing = f"chromium is not installed ({CHROMIUM}): apt-get install -y chromium"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "playwright is not installed: pip install -e '.[test]'"
    if missing is not None:
        if os.environ.get("ORCHMEM_NO_BROWSER") == "1":
            pytest.skip(f"{missing} (ORCHMEM_NO_BROWSER=1)")
        pytest.fail(missing)
    assert found is not None
    return found


def launch(playwright: Any, path: str) -> Any:
    """Headless Chromium (no sandbox: tests run as root in containers)."""
    return playwright.chromium.launch(executable_path=path, headless=True,
                                      args=["--no-sandbox", "--disable-gpu"])
