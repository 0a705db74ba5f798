"""Screenshots of Dagster UI pages through headless chromium's DevTools protocol (for take.sh), and the browser that
tests/interfaces/test_ui_browser.py measures the UI's tables with.

    python docs/screenshots/shoot.py PORT OUT_DIR name=/path[|height][|js][|width] ...

Each page loads at its width (default 1440 px), waits until the UI shows its content, runs its optional JavaScript
(a click; or an expression giving [x, y], where the mouse then hovers), waits again, and is captured at the given
height.
"""
from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
WIDTH = 1440
# The UI has drawn a page once it holds text beyond the navigation's (an asset's metadata, a graph's node names).
SETTLED = "document.body.innerText.length > 400"


class Page:
    """One tab, spoken to over the DevTools protocol."""

    def __init__(self, url: str):
        from websockets.sync.client import connect

        self.ws, self.ids = connect(url, max_size=None).__enter__(), itertools.count(1)

    def call(self, method: str, **params) -> dict:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == n:
                return reply.get("result", {})

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"].get("exception", {}).get("description", expression))
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float = 90, settle_s: float = 1.5) -> None:
        """Poll until `expression` is true, then let rendering finish."""
        deadline = time.monotonic() + timeout_s
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never satisfied: {expression}")
            time.sleep(0.5)
        time.sleep(settle_s)

    def goto(self, url: str, width: int = WIDTH, height: int = 1000) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=url)
        time.sleep(1)
        self.wait_for(SETTLED)

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        self.ws.close()


class Browser:
    """Debian's headless chromium on a free DevTools port, with one page; stopped on exit."""

    def __enter__(self) -> Page:
        self.profile = tempfile.mkdtemp(prefix="chromium-")
        self.process = subprocess.Popen([shutil.which("chromium") or "chromium", *FLAGS,
                                         f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
                                         "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"   # chromium writes the port it bound here
        for _ in range(120):
            if port_file.is_file() and port_file.read_text().strip():
                break
            time.sleep(0.25)
        port = int(port_file.read_text().splitlines()[0])
        import urllib.request

        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json"))
        self.page = Page(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
        return self.page

    def __exit__(self, *exc) -> None:
        self.page.close()
        self.process.terminate()
        self.process.wait(timeout=30)
        shutil.rmtree(self.profile, ignore_errors=True)


def shoot(port: int, out: Path, specs: list[str]) -> None:
    with Browser() as page:
        for spec in specs:
            name, rest = spec.split("=", 1)
            path, height, script, width = (rest.split("|", 3) + ["", "", ""])[:4]
            page.goto(f"http://127.0.0.1:{port}{path}", int(width or WIDTH), int(height or 1000))
            if script:
                point = page.evaluate(script)
                if isinstance(point, list):   # the script found where to point: hover there (shows a tooltip)
                    page.call("Input.dispatchMouseEvent", type="mouseMoved", x=point[0], y=point[1])
                time.sleep(3)
            page.screenshot(out / f"{name}.png")
            print(out / f"{name}.png")


if __name__ == "__main__":
    shoot(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
