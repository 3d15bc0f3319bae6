"""A plain XML-over-HTTP shipping-rate endpoint (no SOAP), counting its calls."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

from lxml import etree

NAMESPACE = "urn:ship.rates"


class _Rates(BaseHTTPRequestHandler):
    calls: list[bytes]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer(200, b"<ok/>")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.calls.append(body)
        request = etree.fromstring(body)
        weight = float(request.findtext(f"{{{NAMESPACE}}}weight") or 0)
        city = request.findtext(f"{{{NAMESPACE}}}city") or ""
        price = 8 + 2 * weight
        answer = (
            f'<r:RateResponse xmlns:r="{NAMESPACE}"><r:city>{escape(city)}</r:city>'
            f'<r:price currency="CNY">{price:g}</r:price></r:RateResponse>'
        )
        self._answer(200, answer.encode())

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/xml")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def xml_service() -> Iterator[tuple[str, list[bytes]]]:
    """The endpoint on 127.0.0.1: yields its URL and the bodies that reached it."""
    calls: list[bytes] = []
    handler = type("Rates", (_Rates,), {"calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", calls
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
