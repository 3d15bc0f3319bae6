"""identity/tls.py: contexts from the settings, and a bad file as one clear error."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from agent_reach.config import Settings
from agent_reach.identity.tls import (
    TlsSettingError,
    delivery_context,
    serving_context,
)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def files(ca: trustme.CA, tmp_path: Path) -> dict[str, Path]:
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    paths = {
        "cert": tmp_path / "cert.pem",
        "key": tmp_path / "key.pem",
        "ca": tmp_path / "ca.pem",
        "other_key": tmp_path / "other-key.pem",
        "garbage": tmp_path / "garbage.pem",
        "encrypted_key": tmp_path / "encrypted-key.pem",
    }
    leaf.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    leaf.private_key_pem.write_to_path(str(paths["key"]))
    ca.cert_pem.write_to_path(str(paths["ca"]))
    trustme.CA().issue_cert("x").private_key_pem.write_to_path(str(paths["other_key"]))
    paths["garbage"].write_text("not a certificate\n")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    paths["encrypted_key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    return paths


def test_no_tls_settings_serve_plain_http_and_deliver_with_the_system_store():
    assert serving_context(Settings()) is None
    context = delivery_context(Settings())
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] >= 0


def test_the_serving_context_requires_a_client_certificate_only_with_a_client_ca(files):
    plain = serving_context(Settings(tls_cert=files["cert"], tls_key=files["key"]))
    assert plain is not None and plain.verify_mode == ssl.CERT_NONE
    mutual = serving_context(
        Settings(tls_cert=files["cert"], tls_key=files["key"], tls_client_ca=files["ca"])
    )
    assert mutual is not None and mutual.verify_mode == ssl.CERT_REQUIRED
    # The client CA is the only trust: nothing from the system store.
    assert mutual.cert_store_stats()["x509_ca"] == 1


def test_the_delivery_context_adds_the_agent_ca_to_the_system_store(files):
    system = delivery_context(Settings()).cert_store_stats()["x509_ca"]
    added = delivery_context(Settings(agent_ca_file=files["ca"])).cert_store_stats()["x509_ca"]
    assert added == system + 1


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"tls_cert": "missing.pem", "tls_key": "key"}, "AR_TLS_CERT ({missing}) cannot be read"),
        ({"tls_cert": "cert", "tls_key": "missing.pem"}, "AR_TLS_KEY ({missing}) cannot be read"),
        ({"tls_cert": "garbage", "tls_key": "key"}, "AR_TLS_CERT ({garbage}) and AR_TLS_KEY"),
        ({"tls_cert": "cert", "tls_key": "other_key"}, "are not a PEM certificate and its"),
        (
            {"tls_cert": "cert", "tls_key": "encrypted_key"},
            "AR_TLS_KEY ({encrypted_key}) is encrypted: give the key unencrypted",
        ),
        (
            {"tls_cert": "cert", "tls_key": "key", "tls_client_ca": "garbage"},
            "AR_TLS_CLIENT_CA ({garbage}) holds no PEM CA certificate",
        ),
        ({"agent_ca_file": "missing.pem"}, "AR_AGENT_CA_FILE ({missing}) cannot be read"),
        ({"agent_ca_file": "garbage"}, "AR_AGENT_CA_FILE ({garbage}) holds no PEM CA"),
        (
            {"agent_client_cert": "cert", "agent_client_key": "other_key"},
            "AR_AGENT_CLIENT_CERT ({cert}) and AR_AGENT_CLIENT_KEY",
        ),
    ],
)
def test_a_bad_file_is_one_line_naming_the_setting_and_the_file(files, tmp_path, settings, says):
    paths = {**files, "missing.pem": tmp_path / "missing.pem"}
    built = Settings(**{name: paths[value] for name, value in settings.items()})
    with pytest.raises(TlsSettingError) as raised:
        serving_context(built)
        delivery_context(built)
    message = raised.value.message
    expected = says.format(
        missing=paths["missing.pem"],
        garbage=files["garbage"],
        cert=files["cert"],
        encrypted_key=files["encrypted_key"],
    )
    assert expected in message and "\n" not in message
    assert raised.value.code == "bad_tls_setting"
