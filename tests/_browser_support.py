"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium, for the console's tests.

:func:`chromium` skips the test with the reason when Selenium, the browser or its driver is missing (``make test``
installs them on CI, as root: see the Makefile).
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import pytest

BROWSER = ("/usr/bin/chromium", "/usr/lib/chromium/chromium")
DRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")


def _first(paths: tuple[str, ...], name: str) -> str | None:
    return next((p for p in paths if Path(p).is_file()), None) or shutil.which(name)


def chromium(*, width: int = 1280, height: int = 1500):
    """A headless Chromium WebDriver, or ``pytest.skip`` naming what is missing and how to install it."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed: pip install -e '.[dev]'")
    browser, driver = _first(BROWSER, "chromium"), _first(DRIVER, "chromedriver")
    if browser is None or driver is None:
        pytest.skip("no Chromium here: as root, apt-get install -y chromium chromium-driver (make test does on CI)")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def fetched(driver) -> list[str]:
    """Every URL the current page fetched (its navigation and each resource: scripts, styles, API calls, images)."""
    return driver.execute_script(
        "return [location.href].concat(performance.getEntriesByType('resource').map(e => e.name));")


def bodies(urls: list[str]) -> dict[str, str]:
    """Each URL's body as text (images as their bytes decoded with replacement): what the page received."""
    import urllib.error

    out = {}
    for url in dict.fromkeys(urls):
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:  # the console on 127.0.0.1
                out[url] = answer.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as refused:  # an error answer is a response the page got too
            out[url] = f"HTTP {refused.code} " + refused.read().decode("utf-8", "replace")
    return out


def state(url: str) -> dict:
    with urllib.request.urlopen(url + "api/state", timeout=5) as answer:
        return json.loads(answer.read())
