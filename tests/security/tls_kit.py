"""Certificates and TLS peers for the TLS scenarios.

CAs come from `trustme`; leaves with a SPIFFE URI (which trustme does not make) are
signed here with `cryptography` by the same CA. Peers are real servers on 127.0.0.1:
a Python stdlib HTTPS agent that records each client certificate it verified, and
nginx demanding one.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import shutil
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agent_reach.testing.balancer import wait_bound
from agent_reach.testing.ports import on_free_ports


@dataclass(frozen=True)
class Leaf:
    """A certificate (PEM chain) and its key, as files."""

    cert: Path
    key: Path


def ca_file(ca: trustme.CA, directory: Path, name: str) -> Path:
    """The CA's certificate as a PEM file."""
    path = directory / f"{name}-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


def issue(
    ca: trustme.CA,
    directory: Path,
    name: str,
    *,
    common_name: str,
    uris: tuple[str, ...] = (),
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> Leaf:
    """A leaf `ca` signed, with these names, good for server and client use."""
    ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(u) for u in uris]
    sans += [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    leaf = Leaf(directory / f"{name}.pem", directory / f"{name}-key.pem")
    leaf.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    leaf.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return leaf


def client_context(trust: Path, leaf: Leaf | None = None) -> ssl.SSLContext:
    """What a caller dials the coordinator with: trusting `trust`, presenting `leaf`."""
    context = ssl.create_default_context(cafile=str(trust))
    if leaf is not None:
        context.load_cert_chain(leaf.cert, leaf.key)
    return context


def server_context(leaf: Leaf, client_ca: Path | None = None) -> ssl.SSLContext:
    """An agent's server context; with `client_ca` it demands a certificate from it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(leaf.cert, leaf.key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca))
    return context


@dataclass
class StdlibAgent:
    """An HTTPS agent on Python's http.server and ssl: it answers every POST with 200
    and records who presented which certificate (the subject CN) and how many times it
    executed."""

    executions: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


@contextmanager
def stdlib_agent(context: ssl.SSLContext, host: str = "127.0.0.1") -> Iterator[StdlibAgent]:
    """Serve a `StdlibAgent` with `context` on a free port of `host`."""
    agent = StdlibAgent()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer({"status": "ok"})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            cert = self.connection.getpeercert()
            subject = dict(rdn[0] for rdn in cert["subject"]) if cert else {}
            agent.executions.append(
                {"client_cn": subject.get("commonName"), "delivery": json.loads(body)}
            )
            self._answer({"executed": len(agent.executions)})

        def _answer(self, document: dict[str, Any]) -> None:
            payload = json.dumps(document).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer((host, 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    agent.url = f"https://{host}:{server.server_address[1]}/invoke"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield agent
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


NGINX_MTLS_CONF = """\
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 64; }}
http {{
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  log_format executed '$request_method $uri $ssl_client_verify $ssl_client_s_dn';
  access_log {dir}/access.log executed;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_client_certificate {client_ca};
    ssl_verify_client on;
    default_type application/json;
    location = /health {{ return 200 '{{"status":"ok"}}'; }}
    location / {{ return 200 '{{"client":"$ssl_client_s_dn","verify":"$ssl_client_verify"}}'; }}
  }}
}}
"""


@dataclass
class NginxAgent:
    """nginx demanding a client certificate from `client_ca`; `posts()` reads its log."""

    url: str
    log: Path

    def posts(self) -> list[str]:
        """One line per POST that got through the handshake: verification and subject."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [line for line in lines if line.startswith("POST ")]


def nginx_binary() -> str | None:
    return shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )


@contextmanager
def nginx_agent(leaf: Leaf, client_ca: Path) -> Iterator[NginxAgent]:
    """nginx on a free 127.0.0.1 port as an agent that demands mutual TLS."""
    binary = nginx_binary()
    assert binary is not None, "nginx is missing: scripts/test.sh installs it"
    directory = Path(tempfile.mkdtemp(prefix="ar-nginx-mtls-"))
    conf, errors = directory / "nginx.conf", directory / "error.log"

    def start(port: int) -> tuple[subprocess.Popen[bytes], int]:
        for stale in (directory / "nginx.pid", errors):  # an earlier attempt's
            stale.unlink(missing_ok=True)
        conf.write_text(
            NGINX_MTLS_CONF.format(
                dir=directory, port=port, cert=leaf.cert, key=leaf.key, client_ca=client_ca
            )
        )
        process = subprocess.Popen(
            [binary, "-p", str(directory), "-e", str(errors), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_bound(directory, lambda: process.poll() is None, lambda: _text(errors))
        except RuntimeError:
            process.terminate()
            process.wait(10)
            raise
        return process, port

    try:
        process, port = on_free_ports(start)
        try:
            yield NginxAgent(f"https://127.0.0.1:{port}/invoke", directory / "access.log")
        finally:
            process.terminate()
            process.wait(10)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
