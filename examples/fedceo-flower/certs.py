"""Certificates and keys for a secured local Flower deployment, generated with ``cryptography`` (a dependency
of flwr): a throw-away certificate authority, a SuperLink certificate it signs for 127.0.0.1 / localhost, and
one ECDSA key pair per SuperNode (OpenSSH format, as ``flwr supernode register`` and
``flower-supernode --auth-supernode-private-key`` take them).

For trying TLS and node authentication on one machine or in tests. Across machines use certificates from
your own CA, issued for the SuperLink's real host name or address.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class TLSFiles(NamedTuple):
    ca_cert: Path
    server_cert: Path
    server_key: Path


def _write_private(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private keys: owner-only from the start
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_tls_files(folder: str | Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
                   days: int = 2) -> TLSFiles:
    """A CA and a server certificate for ``hosts`` (IP addresses or DNS names), written to ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trustlab local Flower CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP384R1())
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    ca_path = folder / "ca.crt"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path = folder / "server.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return TLSFiles(ca_path, cert_path, _write_private(folder / "server.key", _pem_key(key)))


def make_node_keys(folder: str | Path, name: str) -> tuple[Path, Path]:
    """An ECDSA (SECP384R1) key pair for one SuperNode in OpenSSH format: (private key, public key)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP384R1())
    private = _write_private(folder / name, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()))
    public = folder / f"{name}.pub"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                     serialization.PublicFormat.OpenSSH) + b"\n")
    return private, public
