"""Open the demo warehouse's report in headless Chromium and watch it over the DevTools protocol.

The page must load from file:// with no console message, no exception, no dialog (the hostile
job names and log lines of the demo warehouse carry ``alert(1)`` payloads), no request other
than the page itself, and show its sections. A screenshot goes to tests/artifacts/.

Chromium is required in CI (``CI`` set): the test fails there when it is missing; elsewhere
it skips. Install: ``apt-get install -y chromium`` (Debian).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from helpers.hostile import SCRIPT, build_demo_warehouse

from faultline.report import build_report

ARTIFACTS = Path(os.environ.get("FAULTLINE_TEST_ARTIFACTS", Path(__file__).parents[1] / "artifacts"))
SECTIONS = [
    "do-first",
    "headline",
    "known-issues",
    "failed-jobs",
    "scoreboard",
    "lottery",
    "causes",
    "timeline",
    "racks",
    "lemons",
    "signatures",
    "data-quality",
    "evidence",
    "postmortems",
]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    message = "headless Chromium is not installed (apt-get install -y chromium)"
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{message}; it is required in CI")
    pytest.skip(message)


class DevTools:
    """The smallest DevTools-protocol client: commands with ids, events kept in order."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, timeout: float = 30, **params) -> dict:
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        seen = len(self.events)
        while True:
            for e in self.events[seen:]:
                if e["method"] == method:
                    return e
            seen = len(self.events)
            msg = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if "method" in msg:
                self.events.append(msg)

    def drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                msg = json.loads(self.ws.recv(timeout=max(end - time.monotonic(), 0.01)))
            except TimeoutError:
                return
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression: str):
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return res["result"].get("value")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = _chromium()
    profile = tmp_path_factory.mktemp("chromium-profile")
    log = open(profile.parent / "chromium.log", "wb")
    proc = subprocess.Popen(
        [exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.is_file() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chromium did not start (exit {proc.poll()}); see {log.name}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:  # our own browser
            pages = [t for t in json.load(resp) if t.get("type") == "page"]
        from websockets.sync.client import connect

        with connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=20) as ws:
            yield DevTools(ws)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    wh, _ = build_demo_warehouse(tmp_path_factory.getbasetemp() / "faultline-demo")
    report = build_report(wh, tmp_path_factory.mktemp("browser") / "report.html")
    url = report.resolve().as_uri()
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(f"{domain}.enable")
    browser.send("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
    browser.events.clear()
    browser.send("Page.navigate", url=url)
    browser.wait_for("Page.loadEventFired", timeout=60)
    browser.drain(1.5)  # late console messages, lazy requests
    return browser, url


def test_no_console_errors_exceptions_or_dialogs(page):
    tools, _ = page
    bad = [
        e
        for e in tools.events
        if e["method"] in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Page.javascriptDialogOpening")
    ]
    bad += [
        e
        for e in tools.events
        if e["method"] == "Log.entryAdded" and e["params"]["entry"].get("level") in ("error", "warning")
    ]
    assert not bad, json.dumps(bad, indent=1)[:3000]


def test_no_network_requests_besides_the_page(page):
    tools, url = page
    requests = [e["params"]["request"]["url"] for e in tools.events if e["method"] == "Network.requestWillBeSent"]
    assert requests and all(r == url for r in requests), requests
    failed = [e for e in tools.events if e["method"] == "Network.loadingFailed"]
    assert not failed, failed


def test_sections_render_and_payloads_stay_text(page):
    tools, _ = page
    ids = tools.evaluate("[...document.querySelectorAll('section[id]')].map(s => s.id)")
    assert ids == SECTIONS
    assert tools.evaluate("document.querySelectorAll('script, img, iframe, object, embed').length") == 0
    assert tools.evaluate("document.querySelectorAll('#scoreboard svg circle').length") >= 2
    assert tools.evaluate("document.querySelectorAll('#timeline svg rect').length") > 0
    assert tools.evaluate("document.querySelectorAll('#racks svg rect').length") > 0
    n_links = tools.evaluate("document.querySelectorAll('a[href^=\"#job-\"]').length")
    n_targets = tools.evaluate(
        "[...document.querySelectorAll('a[href^=\"#job-\"]')].filter(a => document.getElementById(a.hash.slice(1))).length"
    )
    assert n_links > 0 and n_links == n_targets
    assert SCRIPT in tools.evaluate("document.body.innerText")  # shown, as text
    width = tools.evaluate("document.documentElement.scrollWidth")
    assert width <= 1400 + 400, f"page is {width}px wide"


def test_screenshot(page):
    tools, _ = page
    height = min(int(tools.evaluate("document.documentElement.scrollHeight")), 6000)
    shot = tools.send(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": 1400, "height": height, "scale": 1},
    )
    import base64

    data = base64.b64decode(shot["data"])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "report.png").write_bytes(data)


def _load(tools: DevTools, url: str) -> list[dict]:
    tools.events.clear()
    tools.send("Page.navigate", url=url)
    tools.wait_for("Page.loadEventFired", timeout=60)
    tools.drain(1.0)
    return tools.events


def test_the_checks_catch_a_bad_page(page, tmp_path):
    """The detectors above are live: a page with a script, a console error and an image fails them."""
    tools, _ = page
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><title>bad</title><img src="missing.png">'
        '<script>console.error("boom"); throw new Error("kaput")</script>'
    )
    events = _load(tools, bad.as_uri())
    kinds = {e["method"] for e in events}
    assert {"Runtime.consoleAPICalled", "Runtime.exceptionThrown"} <= kinds
    urls = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
    assert any(u.endswith("missing.png") for u in urls)


# -- the first screen: what to do first, on the demo night and on a busy month ----------------

FIRST_SCREEN = (1400, 900)
MAX_HEIGHT = 15_000


def _open(tools: DevTools, path: Path) -> None:
    tools.send(
        "Emulation.setDeviceMetricsOverride",
        width=FIRST_SCREEN[0],
        height=FIRST_SCREEN[1],
        deviceScaleFactor=1,
        mobile=False,
    )
    tools.events.clear()
    tools.send("Page.navigate", url=path.resolve().as_uri())
    tools.wait_for("Page.loadEventFired", timeout=60)
    tools.drain(0.5)


@pytest.fixture(scope="module", params=["demo", "lottery"])
def morning(request, browser, tmp_path_factory):
    """The report of the demo (as `faultline demo` builds it) or of the lottery month, open at 1400x900."""
    from helpers.demo import demo_warehouse, lottery_warehouse

    base = tmp_path_factory.getbasetemp()
    wh = (
        demo_warehouse(base / "faultline-cli-demo")[1]
        if request.param == "demo"
        else lottery_warehouse(base / "lottery")
    )
    out = build_report(wh, tmp_path_factory.mktemp(f"morning-{request.param}") / "report.html")
    _open(browser, out)
    return request.param, browser, wh


def _box(tools: DevTools, selector: str) -> dict | None:
    return tools.evaluate(
        f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
        " const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, height: r.height}; })()"
    )


def test_the_first_screen_shows_what_to_do_first(morning):
    name, tools, wh = morning
    from faultline.lake import queries as Q
    from faultline.report.data import load

    con = Q.connect(wh)
    try:
        data = load(con, str(wh))
    finally:
        con.close()
    assert tools.evaluate("window.scrollY") == 0
    for heading in ("#do-first h2", "#drain", "#infra"):
        box = _box(tools, heading)
        assert box and box["bottom"] <= FIRST_SCREEN[1], (name, heading, box)
    # the first node to drain and the first infrastructure failure are on it, whole
    assert data.drain and data.infra_jobs, f"{name}: the night has nothing to drain or no infrastructure failure"
    for table in ("table.drain tbody tr", "table.infra tbody tr"):
        box = _box(tools, table)
        assert box and box["height"] > 0 and box["bottom"] <= FIRST_SCREEN[1], (name, table, box)
    first = tools.evaluate("document.querySelector('table.drain tbody tr td b').innerText")
    assert first == data.drain[0]["target"]
    shown = tools.evaluate(
        # textContent: innerText is empty for the rows a closed <details> folds
        "[...document.querySelectorAll('table.infra tbody tr td:first-child a')].map(a => a.textContent)"
    )
    assert shown == [j["job_id"] for j in data.infra_jobs]  # every one of them, folded past the first rows
    drained = {r["target"] for r in data.drain}
    assert {lem["node"] for lem in data.lemons} <= drained and {f"rack {r['rack']}" for r in data.racks} <= drained
    shot = tools.send(
        "Page.captureScreenshot", format="png", clip={"x": 0, "y": 0, "width": 1400, "height": 900, "scale": 1}
    )
    import base64

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"first-screen-{name}.png").write_bytes(base64.b64decode(shot["data"]))


def test_the_page_stays_short_with_details_folded(morning):
    name, tools, _ = morning
    assert tools.evaluate("document.querySelectorAll('details[open]').length") == 0
    assert tools.evaluate("document.querySelectorAll('details').length") >= 2  # the user/scheduler list and postmortems
    height = tools.evaluate("document.documentElement.scrollHeight")
    assert height < MAX_HEIGHT, f"{name}: the page is {height}px tall"
    width = tools.evaluate("document.documentElement.scrollWidth")
    assert width <= FIRST_SCREEN[0], f"{name}: the page is {width}px wide"
