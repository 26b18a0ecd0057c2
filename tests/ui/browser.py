"""Headless Chromium driven over the DevTools protocol, for screenshots of pages served on 127.0.0.1.

Loopback only: Chromium is started with a host-resolver rule that maps every host name except
``127.0.0.1`` to "not found", its DevTools endpoint listens on 127.0.0.1, and :func:`screenshot` refuses
any URL whose host is not ``127.0.0.1``. Needs a ``chromium`` (or ``chromium-browser`` /
``google-chrome``) binary and the ``websocket-client`` package; :func:`missing` says what is absent.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional, Union

__all__ = ["chromium_binary", "missing", "free_port", "screenshot", "PageNotReady"]

LOOPBACK = "127.0.0.1"


class PageNotReady(RuntimeError):
    """The page never showed what the caller waited for (its visible text is in the message)."""


def chromium_binary() -> Optional[str]:
    """Path of a Chromium-like browser, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def missing() -> Optional[str]:
    """Why screenshots cannot be taken here (None when they can)."""
    if chromium_binary() is None:
        return "no chromium binary on PATH (apt-get install chromium)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "the websocket-client package is not installed (pip install websocket-client)"
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def wait_for_http(url: str, timeout: float) -> None:
    """Wait until ``url`` answers (any HTTP status), or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read(1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout:.0f} s") from None
            time.sleep(0.3)


#: the page's text, shadow roots included (Polymer dashboards such as TensorBoard's HParams live there)
_DEEP_TEXT = """(function walk(node) {
  if (!node) return '';
  if (node.nodeType === Node.TEXT_NODE) return node.textContent;
  if (node.nodeName === 'SCRIPT' || node.nodeName === 'STYLE') return '';
  let text = node.shadowRoot ? walk(node.shadowRoot) + ' ' : '';
  for (const child of node.childNodes) text += walk(child) + ' ';
  return text;
})(document.body).replace(/\\s+/g, ' ')"""


class _DevTools:
    def __init__(self, ws_url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0

    def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"DevTools {method}: {message['error']}")
                return message.get("result", {})

    def text(self) -> str:
        result = self.call("Runtime.evaluate", expression=_DEEP_TEXT, returnByValue=True)
        return str(result.get("result", {}).get("value", ""))

    def close(self) -> None:
        self.ws.close()


def screenshot(url: str, out: Union[str, Path], wait_for: tuple = (), timeout: float = 90.0,
               width: int = 1600, height: int = 900, settle: float = 2.0) -> str:
    """Load ``url`` (host 127.0.0.1 only) in headless Chromium, wait until the page's visible text holds
    every string of ``wait_for`` (then ``settle`` seconds more for drawing), save a PNG to ``out`` and
    return the page's visible text. Raises :class:`PageNotReady` naming what never appeared."""
    if urllib.parse.urlsplit(url).hostname != LOOPBACK:
        raise ValueError(f"screenshots are taken of {LOOPBACK} pages only, got {url}")
    binary = chromium_binary()
    if binary is None:
        raise RuntimeError(missing())
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="rlearn-chromium-") as profile:
        process = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--disable-extensions", "--disable-background-networking",
             f"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE {LOOPBACK}",
             f"--remote-debugging-address={LOOPBACK}", f"--remote-debugging-port={port}",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_http(f"http://{LOOPBACK}:{port}/json/version", 60)
            targets = json.load(urllib.request.urlopen(f"http://{LOOPBACK}:{port}/json/list", timeout=10))
            page = next(t for t in targets if t.get("type") == "page")
            tools = _DevTools(page["webSocketDebuggerUrl"])
            try:
                tools.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                           deviceScaleFactor=1, mobile=False)
                tools.call("Page.enable")
                tools.call("Page.navigate", url=url)
                deadline = time.monotonic() + timeout
                text = ""
                while True:
                    text = tools.text()
                    absent = [want for want in wait_for if want not in text]
                    if not absent:
                        break
                    if time.monotonic() > deadline:
                        raise PageNotReady(f"{url}: {absent} never appeared within {timeout:.0f} s; the page "
                                           f"shows: {text[:600]!r}")
                    time.sleep(1.0)
                time.sleep(settle)
                shot = tools.call("Page.captureScreenshot", format="png")
                Path(out).write_bytes(base64.b64decode(shot["data"]))
                return tools.text()
            finally:
                tools.close()
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
