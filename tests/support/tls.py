"""A throwaway certificate authority for tests that need https on 127.0.0.1: a server context for a receiver and a
client context that trusts it (the worker's own contexts trust only the system's roots)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TestCertificate:
    server: ssl.SSLContext  # for the receiver
    client: ssl.SSLContext  # trusts the server's certificate


def self_signed(*names: str) -> TestCertificate:
    """A self-signed certificate for ``names`` (DNS names; ``127.0.0.1`` is always in it), with its contexts."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    alternatives: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alternatives.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = Path(tempfile.mkdtemp(prefix="warren-tls-"))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return TestCertificate(server, client)
