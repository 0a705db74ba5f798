"""Screenshots of Dagster UI pages through headless chromium's DevTools protocol (for take.sh).

    python docs/screenshots/shoot.py PORT OUT_DIR name=/path[|height][|js][|width] ...

Each page loads at its width (default 1400 px), waits until the UI settled, runs its optional JavaScript (a
click), waits again, and is captured at the given height.
"""
import base64
import itertools
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
DEBUG_PORT = 9227


class Page:
    def __init__(self, url: str):
        self.ws, self.ids = connect(url, max_size=None).__enter__(), itertools.count(1)

    def call(self, method: str, **params) -> dict:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == n:
                return reply.get("result", {})


def shoot(port: int, out: Path, specs: list[str]) -> None:
    profile = tempfile.mkdtemp()
    browser = subprocess.Popen(["chromium", *FLAGS, f"--user-data-dir={profile}",
                                f"--remote-debugging-port={DEBUG_PORT}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(60):
            try:
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{DEBUG_PORT}/json"))
                break
            except OSError:
                time.sleep(0.5)
        page = Page(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
        for spec in specs:
            name, rest = spec.split("=", 1)
            path, height, script, width = (rest.split("|", 3) + ["", "", ""])[:4]
            page.call("Emulation.setDeviceMetricsOverride", width=int(width or 1400), height=int(height or 1000),
                      deviceScaleFactor=1, mobile=False)
            page.call("Page.navigate", url=f"http://127.0.0.1:{port}{path}")
            time.sleep(12)
            if script:
                page.call("Runtime.evaluate", expression=script)
                time.sleep(6)
            shot = page.call("Page.captureScreenshot", format="png")
            (out / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))
            print(out / f"{name}.png")
    finally:
        browser.terminate()
        browser.wait(timeout=30)


if __name__ == "__main__":
    shoot(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
