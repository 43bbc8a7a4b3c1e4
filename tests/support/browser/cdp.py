"""A tiny headless-Chromium driver over the DevTools protocol, standard library only.

Chromium is started with ``--remote-debugging-pipe``: the protocol runs over
file descriptors 3 (commands in) and 4 (events and replies out), one JSON
message per NUL byte, so no port is opened and no websocket is needed.

``open_page(url)`` loads a page with an init script that records every
``alert``/``confirm``/``prompt`` call (and ``Page.javascriptDialogOpening``
catches any dialog that opens anyway, which is then dismissed), waits for the
load event and until every ``.chart`` holds plotly's ``.main-svg`` (or a
time limit), and returns what happened: console errors and warnings,
uncaught exceptions, log entries (failed loads), dialogs, the chart status,
the page's text, its DOM and a full-page PNG screenshot.

Rules: Chromium runs as root only with ``--no-sandbox``; its profile is a new
empty folder; it is stopped by its PID (SIGTERM, then SIGKILL) in ``close``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")

# Records dialogs instead of opening them; runs before any script of the page.
INIT_SCRIPT = """
window.__pyproflab_dialogs = [];
for (const name of ["alert", "confirm", "prompt"]) {
  const record = (msg) => { window.__pyproflab_dialogs.push(name + ":" + String(msg)); };
  try { Object.defineProperty(window, name, {value: record, writable: false}); }
  catch (e) { window[name] = record; }
}
"""

# True when every chart div holds plotly's SVG (and there is at least one chart).
CHARTS_JS = """
(() => {
  const charts = Array.from(document.querySelectorAll('.chart'));
  return JSON.stringify(charts.map(c => ({
    name: c.getAttribute('data-chart'),
    svg: c.querySelectorAll('.main-svg').length,
    width: c.getBoundingClientRect().width,
  })));
})()
"""


def chromium_binary() -> str | None:
    for path in CHROMIUM_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


class CdpError(RuntimeError):
    pass


@dataclass
class PageResult:
    """What happened while a page loaded (see the module docstring)."""

    url: str
    console: list[dict[str, Any]] = field(default_factory=list)  # {type, text}
    exceptions: list[str] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)  # Log.entryAdded entries
    dialogs: list[str] = field(default_factory=list)  # opened (Page.javascriptDialogOpening)
    recorded_dialogs: list[str] = field(default_factory=list)  # caught by the init script
    charts: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    dom: str = ""
    screenshot: bytes = b""
    probe: Any = None
    seconds: float = 0.0

    @property
    def console_errors(self) -> list[str]:
        errs = [c["text"] for c in self.console if c["type"] in ("error", "assert")]
        errs += [e.get("text", "") for e in self.log if e.get("level") == "error"]
        return errs + self.exceptions

    @property
    def any_dialog(self) -> list[str]:
        return self.dialogs + self.recorded_dialogs


class Browser:
    """One headless Chromium; use as a context manager."""

    def __init__(self, binary: str | None = None, *, width: int = 1280, height: int = 900):
        self.binary = binary or chromium_binary()
        if self.binary is None:
            raise CdpError("chromium not found")
        self.profile_dir = tempfile.mkdtemp(prefix="pyproflab-chromium-")
        # Pipes: we write commands to fd 3 of the child, read its fd 4.
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()
        # The child's fd 3 and 4 must be exactly these: in the child, copy both above 10
        # first (either may itself be 3 or 4), then into place. dup2 makes them
        # inheritable; the originals are close-on-exec. subprocess closes fds after
        # preexec_fn when close_fds is set, so it is off (only inheritable fds survive).
        args = [
            self.binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--mute-audio",
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile_dir}",
            f"--window-size={width},{height}",
            "about:blank",
        ]

        def child_fds() -> None:
            high_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
            high_w = fcntl.fcntl(out_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=child_fds,
            start_new_session=True,
        )
        os.close(cmd_r)
        os.close(out_w)
        self._buf = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    # --- the protocol ----------------------------------------------------------------

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        return self._next_id

    def _read(self, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._out_r], [], [], left)
            if not ready:
                return None
            chunk = os.read(self._out_r, 1 << 20)
            if not chunk:
                raise CdpError(f"chromium closed the pipe (exit {self.proc.poll()})")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def call(
        self,
        method: str,
        params: dict | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """Send a command and wait for its reply (events meanwhile are queued)."""
        mid = self._send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(max(0.0, deadline - time.monotonic()))
            if msg is None:
                raise CdpError(f"{method}: no reply in {timeout} s")
            if msg.get("id") == mid:
                if "error" in msg:
                    raise CdpError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._events.append(msg)

    def events(self, timeout: float) -> list[dict[str, Any]]:
        """Queued events plus those arriving within ``timeout``."""
        out, self._events = self._events, []
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(max(0.0, deadline - time.monotonic()))
            if msg is None:
                return out
            out.append(msg)

    # --- a page ----------------------------------------------------------------------

    def open_page(
        self,
        url: str,
        *,
        wait_charts: bool = True,
        timeout: float = 45.0,
        settle: float = 0.5,
        init_script: str | None = INIT_SCRIPT,
        probe: str | None = None,
    ) -> PageResult:
        """Load ``url`` and report (see the module docstring). ``init_script=None`` leaves
        dialogs unhooked (they open, are seen and dismissed); ``probe`` is a JS
        expression evaluated at the end, its value in ``PageResult.probe``."""
        started = time.monotonic()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        res = PageResult(url)
        try:
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable", session=sid)
            if init_script:
                self.call(
                    "Page.addScriptToEvaluateOnNewDocument", {"source": init_script}, session=sid
                )
            self.call("Page.navigate", {"url": url}, session=sid)
            loaded = False
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for ev in self.events(0.2):
                    self._note(ev, res, sid)
                    loaded |= ev.get("method") == "Page.loadEventFired"
                if loaded:
                    if not wait_charts:
                        break
                    res.charts = json.loads(self._eval(CHARTS_JS, sid))
                    if all(c["svg"] for c in res.charts):
                        break
            else:
                res.charts = json.loads(self._eval(CHARTS_JS, sid)) if loaded else []
            for ev in self.events(settle):  # late console messages
                self._note(ev, res, sid)
            res.recorded_dialogs = json.loads(
                self._eval("JSON.stringify(window.__pyproflab_dialogs || [])", sid)
            )
            res.text = self._eval("document.body ? document.body.innerText : ''", sid)
            res.dom = self._eval("document.documentElement.outerHTML", sid)
            if probe:
                res.probe = self._eval(probe, sid)
            metrics = self.call("Page.getLayoutMetrics", session=sid)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            shot = self.call(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {
                        "x": 0,
                        "y": 0,
                        "width": size["width"],
                        "height": min(size["height"], 16000),
                        "scale": 1,
                    },
                },
                session=sid,
                timeout=60,
            )
            res.screenshot = base64.b64decode(shot["data"])
            for ev in self.events(0):
                self._note(ev, res, sid)
        finally:
            self.call("Target.closeTarget", {"targetId": target})
        res.seconds = time.monotonic() - started
        return res

    def _eval(self, expression: str, sid: str) -> Any:
        got = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=sid
        )
        if "exceptionDetails" in got:
            raise CdpError(f"evaluate failed: {got['exceptionDetails']}")
        return got["result"].get("value")

    def _note(self, ev: dict[str, Any], res: PageResult, sid: str) -> None:
        method, params = ev.get("method"), ev.get("params", {})
        if ev.get("sessionId") not in (None, sid):
            return
        if method == "Runtime.consoleAPICalled":
            text = " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
            )
            res.console.append({"type": params.get("type"), "text": text})
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            res.exceptions.append(d.get("exception", {}).get("description") or d.get("text", ""))
        elif method == "Log.entryAdded":
            res.log.append(params.get("entry", {}))
        elif method == "Page.javascriptDialogOpening":
            res.dialogs.append(f"{params.get('type')}:{params.get('message')}")
            self._send("Page.handleJavaScriptDialog", {"accept": False}, sid)

    # --- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        try:
            self._send("Browser.close")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=5)
        for fd in (self._cmd_w, self._out_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile_dir, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
