"""Screenshots of each inspector view for docs/inspector.md (not run by the suite).

Starts `thoth serve --port 0` on a fresh demo home (the replay model), fills it through the HTTP API
(facts, turns, recalls) plus one skill draft waiting for approval, and saves what headless chromium
(Debian's, through Selenium) shows: docs/img/inspector-<view>.png at 1100 px wide, and the overview
and approvals again at 400 px (`-narrow`).

    .venv/bin/python scripts/inspector_screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "serve" / "tests"))

from test_inspector_browser import browser, draft_skill  # noqa: E402
from thoth_serve.testing import Server, make_home  # noqa: E402

TOKEN = "screenshots"
PEER = "ann"
FACTS = (
    "I live in Lisbon",
    "my sister is Maria",
    "Maria lives in Porto",
    "I work at Tide Labs",
    "I prefer green tea to coffee",
    "my dog is Rex",
)
TURNS = (
    "Can you suggest a tea for the evening?",
    "Remind me what my sister's name is",
    "What should I pack for a weekend in Porto?",
)
VIEWS = {
    "overview": "/",
    "sessions": "/sessions",
    "identity": "/identity",
    "episodes": "/episodes?q=tea",
    "files": "/files",
    "approvals": "/approvals",
    "forget": "/forget",
    "search": "/search?q=sister",
}
NARROW = ("overview", "approvals")


def fill(server: Server) -> None:
    """Facts, turns and a few recalls through the API (the recalls give the latency plot its samples)."""
    for text in FACTS:
        status, body = server.request("POST", f"/v1/peers/{PEER}/memories", {"text": text})
        assert status == 200, body
        time.sleep(0.3)  # the growth plot gets a slope
    for number, text in enumerate(TURNS):
        status, body = server.request(
            "POST", f"/v1/peers/{PEER}/turns", {"text": text, "thread": f"demo-{number % 2}"},
            headers={**server.headers(), "Accept": "application/json"},
        )
        assert status == 200, body
    for query in ("tea", "sister", "Porto", "work", "dog", "Lisbon", "coffee", "weekend"):
        server.request("GET", f"/v1/peers/{PEER}/recall?q={quote(query)}&k=5")
        time.sleep(0.2)


def shoot(driver, url: str, path: Path, width: int) -> None:  # noqa: ANN001 - selenium's WebDriver
    """The whole page at this width as a PNG."""
    driver.set_window_size(width, 900)
    driver.get(url)
    time.sleep(0.5)  # the event stream opens; the status line says so
    driver.execute_script("var d = document.querySelector('main details'); if (d) { d.open = true; }")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(int(height) + 40, 4000))
    time.sleep(0.2)
    driver.save_screenshot(str(path))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        home = make_home(Path(tmp))
        draft_skill(home)
        server = Server(home, token=TOKEN)
        try:
            fill(server)
            driver = browser(1100, 900)
            try:
                driver.get(f"{server.url}/login?token={TOKEN}&next={quote(f'/?peer={PEER}', safe='')}")
                for name, view in VIEWS.items():
                    url = f"{server.url}{view}{'&' if '?' in view else '?'}peer={PEER}"
                    shoot(driver, url, args.out / f"inspector-{name}.png", 1100)
                    if name in NARROW:
                        shoot(driver, url, args.out / f"inspector-{name}-narrow.png", 400)
            finally:
                driver.quit()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
