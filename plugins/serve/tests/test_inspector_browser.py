"""The inspector in a real browser (Debian's chromium through Selenium) against a real `thoth serve --port 0`.

At 400 px wide, keyboard only: log in with the token, `/` to the search box, recall with Enter, Tab to an
approval and approve it with Enter, then watch a turn posted through the API appear without a reload.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from thoth_serve.testing import make_home

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and DRIVER.exists()),
        reason=f"no {CHROMIUM} or {DRIVER}: Debian chromium and chromium-driver (scripts/dev setup installs them)",
    ),
]
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
)
TOKEN = "inspector-token-5d2e"
WIDTH, HEIGHT = 400, 900
WAIT = 30.0
VIEWS = ("/", "/sessions", "/identity", "/episodes", "/files", "/approvals", "/forget", "/search?q=tea")


def browser(width: int = WIDTH, height: int = HEIGHT):  # noqa: ANN201 - selenium's WebDriver, imported lazily
    """Headless chromium of the system, driven through its own chromedriver (Selenium Manager never downloads)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(DRIVER)))
    driver.set_window_size(width, height)
    driver.set_page_load_timeout(60)
    return driver


def until(check, what: str, timeout: float = WAIT):  # noqa: ANN001, ANN201
    """Poll check() until it is truthy; its value, or an AssertionError naming what never happened."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def draft_skill(home: Path) -> str:
    """A skill draft in the home's approval queue (as reflection would leave one), about ann."""
    import thoth_procedural.plugin
    from thoth_procedural import drafts

    from thoth_core import Runtime

    async def write() -> str:
        runtime = Runtime.load(home / "thoth.toml", autoload=False)
        runtime.register(thoth_procedural.plugin, name="procedural")
        try:
            path = drafts.write_draft(
                runtime, name="brew-tea", description="how to brew green tea", body="Boil water. Wait. Pour.",
                source={"workspace": "default", "peer": "ann", "thread": "t1"}, flags=[],
            )
            return f"skill:{path.name}"
        finally:
            await runtime.aclose()

    return asyncio.run(write())


@pytest.fixture(scope="module")
def chromium(served):
    """The browser, started after the server and closed before it (its event stream would hold the server up)."""
    driver = browser()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def served(tmp_path_factory, start_server):
    home = make_home(tmp_path_factory.mktemp("inspector"))
    item = draft_skill(home)
    server = start_server(home, token=TOKEN)
    status, body = server.request("POST", "/v1/peers/ann/memories", {"text": "I like green tea <b>strong</b>"})
    assert status == 200, body
    status, body = server.request("POST", "/v1/peers/ann/memories", {"text": "my motto is " + "unbreakable" * 30})
    assert status == 200, body  # one 330-character word: it must wrap, not widen the page
    return server, item


def no_sideways_scroll(driver) -> bool:  # noqa: ANN001
    return bool(driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"))


def focused(driver):  # noqa: ANN001, ANN201
    return driver.switch_to.active_element


def test_the_inspector_by_keyboard_at_400px_with_a_live_update(served, chromium):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    server, item = served
    driver = chromium
    driver.get(f"{server.url}/login?token={TOKEN}&next={quote('/?peer=ann', safe='')}")
    until(lambda: driver.find_elements(By.CSS_SELECTOR, "h1"), "the overview")
    assert "Memory of ann" in driver.find_element(By.TAG_NAME, "h1").text
    assert driver.execute_script("return window.innerWidth") <= WIDTH

    for view in VIEWS:  # every view fits: no horizontal scroll at 400 px
        sep = "&" if "?" in view else "?"
        driver.get(f"{server.url}{view}{sep}peer=ann")
        until(lambda: driver.find_elements(By.TAG_NAME, "main"), f"the page {view}")
        assert no_sideways_scroll(driver), f"{view} scrolls sideways at {WIDTH}px"
        assert not driver.find_elements(By.TAG_NAME, "b"), f"{view}: a remembered <b> became markup"

    driver.get(f"{server.url}/?peer=ann")
    ActionChains(driver).send_keys("/").perform()  # `/` focuses the search box
    assert focused(driver).get_attribute("id") == "q"
    focused(driver).send_keys("green tea", Keys.ENTER)  # the form submits with Enter
    until(lambda: "/search" in driver.current_url, "the recall page")
    hits = driver.find_element(By.ID, "main").text
    assert "green tea" in hits and "<b>strong</b>" in hits  # shown as text
    assert driver.find_elements(By.CSS_SELECTOR, "dl.why"), "a hit without its explanation"

    driver.get(f"{server.url}/approvals?peer=ann")
    assert item in driver.find_element(By.ID, "main").text
    assert driver.find_elements(By.CSS_SELECTOR, ".diff .add"), "no diff shown for the draft"
    for _ in range(60):  # Tab through the page to the Approve button
        ActionChains(driver).send_keys(Keys.TAB).perform()
        if focused(driver).text == "Approve":
            break
    else:
        raise AssertionError("Tab never reached the Approve button")
    outline = driver.execute_script("return getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", ""), "the focused button shows no focus ring"
    focused(driver).send_keys(Keys.ENTER)
    until(lambda: "Nothing is waiting for approval." in driver.page_source, "the approved item to leave the queue")
    assert 'role="status"' in driver.page_source and item not in driver.find_element(By.ID, "queue").text
    status, body = server.request("GET", "/v1/approvals?peer=ann")
    assert status == 200 and body["items"] == [], body

    driver.get(f"{server.url}/?peer=ann")
    until(lambda: "Live updates: on" in driver.find_element(By.ID, "live").text, "the event stream to open")
    status, body = server.request("POST", "/v1/peers/ann/turns", {"text": "live marker zebra", "thread": "live"},
                                  headers={**server.headers(), "Accept": "application/json"})
    assert status == 200, body
    until(lambda: "A turn landed" in driver.find_element(By.ID, "live").text, "the live update after the turn")
    until(lambda: "zebra" in driver.find_element(By.ID, "recent").text, "the turn in the latest records")
    assert no_sideways_scroll(driver)
