"""A raw-bytes HTTP/1.1 client for edge tests: send any bytes, read replies in order."""

from __future__ import annotations

import json
import socket
from collections import deque
from dataclasses import dataclass

import httptools

IO_TIMEOUT_S = 10.0  # a safety net for blocking reads; no test waits for it


@dataclass
class Reply:
    """One parsed reply (1xx included)."""

    status: int
    headers: dict[str, str]
    body: bytes

    def code(self) -> str:
        """The `error.code` of a JSON error body."""
        return str(json.loads(self.body)["error"]["code"])


class RawClient:
    """One connection speaking raw bytes; replies (1xx included) parsed as they come."""

    def __init__(self, url: str, *, receive_buffer: int | None = None) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.socket()
        if receive_buffer is not None:  # set before connecting: it sizes the TCP window
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(IO_TIMEOUT_S)
        self.sock.connect((host, int(port)))
        self.parser = httptools.HttpResponseParser(self)
        self.replies: deque[Reply] = deque()
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self) -> Reply:
        while not self.replies:
            data = self.sock.recv(65536)
            assert data, "the server closed the connection instead of answering"
            self.parser.feed_data(data)
        return self.replies.popleft()

    def read_to_end(self) -> bytes:
        """Everything until the server closes the connection."""
        chunks = []
        while data := self.sock.recv(65536):
            chunks.append(data)
        return b"".join(chunks)

    def is_closed(self) -> bool:
        """Blocks until the server closes (True) or sends more bytes (False)."""
        try:
            return self.sock.recv(65536) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._headers, self._body = {}, []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode().lower()] = value.decode()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        status = self.parser.get_status_code()
        self.replies.append(Reply(status, self._headers, b"".join(self._body)))
