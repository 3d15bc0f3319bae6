"""TLS contexts from the settings, built once at startup.

Inbound, `serving_context` makes the coordinator's port HTTPS (`AR_TLS_CERT`,
`AR_TLS_KEY`); with `AR_TLS_CLIENT_CA` every client must present a certificate that CA
issued, and that CA is the only one trusted for it. Outbound, `delivery_context` is
what deliveries and probes to `https://` agents use: the system store plus
`AR_AGENT_CA_FILE`, presenting `AR_AGENT_CLIENT_CERT` / `AR_AGENT_CLIENT_KEY` to an
agent that asks for a certificate. The SDK builds its contexts with the same two
functions. A file that cannot be read, or does not hold what it should, is
`TlsSettingError`: one line naming the setting and the file, never a traceback.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from agent_reach.config import Settings
from agent_reach.errors import TlsSettingError

# TLS 1.2 and 1.3 only: what Mozilla's "intermediate" configuration and every
# supported client accept; ssl.create_default_context() sets the same floor.
MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2
ALPN = ["http/1.1"]  # the edge server speaks HTTP/1.1; a client offering h2 falls back


def server_context(
    cert: Path,
    key: Path,
    client_ca: Path | None = None,
    *,
    names: tuple[str, str, str] = ("AR_TLS_CERT", "AR_TLS_KEY", "AR_TLS_CLIENT_CA"),
) -> ssl.SSLContext:
    """A server context presenting `cert` (a PEM chain) with `key`; with `client_ca`,
    a client certificate issued by it is required at the handshake. `names` are the
    settings the files came from, for the error message."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MINIMUM_VERSION
    context.set_alpn_protocols(ALPN)
    _load_chain(context, cert, key, names[0], names[1])
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        _load_authorities(context, client_ca, names[2])
    return context


def client_context(
    ca_file: Path | None = None,
    cert: Path | None = None,
    key: Path | None = None,
    *,
    names: tuple[str, str, str] = (
        "AR_AGENT_CA_FILE",
        "AR_AGENT_CLIENT_CERT",
        "AR_AGENT_CLIENT_KEY",
    ),
) -> ssl.SSLContext:
    """A client context: the system's trusted CAs and `ca_file`'s, host names checked;
    `cert` and `key` are presented to a server that asks for a client certificate."""
    context = ssl.create_default_context()
    context.minimum_version = MINIMUM_VERSION
    if ca_file is not None:
        _load_authorities(context, ca_file, names[0])
    if cert is not None:
        if key is None:
            raise TlsSettingError(f"{names[1]} needs {names[2]}: the key of the certificate")
        _load_chain(context, cert, key, names[1], names[2])
    return context


def serving_context(settings: Settings) -> ssl.SSLContext | None:
    """The coordinator's own port: None (plain HTTP) unless AR_TLS_CERT is set."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    return server_context(settings.tls_cert, settings.tls_key, settings.tls_client_ca)


def delivery_context(settings: Settings) -> ssl.SSLContext:
    """Deliveries and probes to https agents (AR_AGENT_CA_FILE, AR_AGENT_CLIENT_CERT/KEY)."""
    return client_context(
        settings.agent_ca_file, settings.agent_client_cert, settings.agent_client_key
    )


def _load_chain(
    context: ssl.SSLContext, cert: Path, key: Path, cert_name: str, key_name: str
) -> None:
    _check_readable(cert, cert_name)
    _check_readable(key, key_name)

    def encrypted() -> str:
        # Else OpenSSL would prompt for a pass phrase on the terminal, and a service hang.
        raise TlsSettingError(f"{key_name} ({key}) is encrypted: give the key unencrypted")

    try:
        context.load_cert_chain(cert, key, password=encrypted)
    except ssl.SSLError as exc:
        raise TlsSettingError(
            f"{cert_name} ({cert}) and {key_name} ({key}) are not a PEM certificate and its "
            f"private key ({_reason(exc)})"
        ) from None


def _load_authorities(context: ssl.SSLContext, path: Path, name: str) -> None:
    _check_readable(path, name)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise TlsSettingError(
            f"{name} ({path}) holds no PEM CA certificate ({_reason(exc)})"
        ) from None


def _check_readable(path: Path, name: str) -> None:
    """OpenSSL's own errors do not say which file they are about: ask first."""
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise TlsSettingError(f"{name} ({path}) cannot be read: {exc.strerror or exc}") from None


def _reason(exc: ssl.SSLError) -> str:
    return (exc.reason or str(exc)).lower().replace("_", " ")
