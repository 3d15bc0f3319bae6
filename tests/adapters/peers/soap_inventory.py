"""A SOAP inventory service written with spyne (1.1 and 1.2), counting its calls."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from spyne import Application, Integer, ServiceBase, Unicode, rpc
from spyne.model.fault import Fault
from spyne.protocol.soap import Soap11, Soap12
from spyne.server.wsgi import WsgiApplication

NAMESPACE = "urn:erp.inventory"
STOCK = {"SKU-1": 7, "SKU-2": 0}


@dataclass
class Ledger:
    """What reached the service: one sku per CheckStock call."""

    calls: list[str] = field(default_factory=list)


def _service(ledger: Ledger) -> type[ServiceBase]:
    class InventoryService(ServiceBase):  # type: ignore[misc]
        @rpc(Unicode, _returns=Integer)  # type: ignore[misc]
        def CheckStock(ctx: Any, sku: str) -> int:
            ledger.calls.append(sku)
            if sku not in STOCK:
                raise Fault(faultcode="Client.UnknownSku", faultstring=f"no such sku: {sku}")
            return STOCK[sku]

    return InventoryService


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    """One thread per request: a WSDL read never waits behind a call."""

    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def soap_service(version: str = "1.1") -> Iterator[tuple[str, Ledger]]:
    """The service on 127.0.0.1: yields its URL and its ledger."""
    ledger = Ledger()
    protocol = Soap11 if version == "1.1" else Soap12
    app = Application(
        [_service(ledger)],
        tns=NAMESPACE,
        in_protocol=protocol(validator="lxml"),
        out_protocol=protocol(),
    )
    server: WSGIServer = make_server(
        "127.0.0.1", 0, WsgiApplication(app), server_class=_ThreadingServer, handler_class=_Quiet
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/", ledger
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
