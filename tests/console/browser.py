"""A headless Chromium driven through chromedriver (selenium): Debian's `chromium` and `chromium-driver`, never a
downloaded browser. Tests that need it skip where it is absent, unless OPENDDB_TEST_BROWSER=required (CI), where
its absence fails them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1000")


def missing() -> str | None:
    """Why no browser can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"no {path}: apt-get install {package}"
    return None


def require_browser() -> None:
    reason = missing()
    if reason is None:
        return
    if os.environ.get("OPENDDB_TEST_BROWSER") == "required":
        pytest.fail(f"OPENDDB_TEST_BROWSER=required, but {reason}")
    pytest.skip(f"the console's browser tests need Chromium: {reason}")


def chromium(profile: Path) -> Iterator[object]:
    """A fresh headless Chromium with its own profile directory, closed after use."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
