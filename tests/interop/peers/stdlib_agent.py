"""An agent on Python's http.server (ThreadingHTTPServer, listen backlog 5), speaking
HTTP/1.0 or 1.1 (`stdlib_agent.py 1.0|1.1`). Prints "PORT <n>"; GET /stats -> acted.
HTTP/1.0 answers without a Content-Length: the body ends when the connection closes."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from shapes import shape

VERSION = sys.argv[1] if len(sys.argv) > 1 else "1.1"
acted = 0
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = f"HTTP/{VERSION}"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        stats = json.dumps({"acted": acted}).encode()
        self._send(200, [("content-type", "application/json")], stats)

    def do_POST(self) -> None:
        global acted
        with lock:
            acted += 1
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        status, headers, data, delay_s = shape(f"http.server/{VERSION}", self.path, body)
        time.sleep(delay_s)
        self._send(status, headers, data)

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if VERSION == "1.1" or status == 204:
            self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"PORT {server.server_address[1]}", flush=True)
server.serve_forever()
