"""`openddb cert`: a local certificate authority and a server certificate it signs, for `serve --tls-cert/--tls-key`.

Clients are told to trust the authority (boto3: `verify="<dir>/openddb-ca.pem"` or AWS_CA_BUNDLE; the AWS CLI:
`--ca-bundle`; Node: NODE_EXTRA_CA_CERTS), not the server certificate itself, as with a real CA. The private keys
are written owner-only. ECDSA P-256 keys: small, fast to make and to handshake with, accepted by every SDK's TLS.
Needs the `cryptography` package (`pip install 'openddb[tls]'`).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class CertificateFiles:
    ca: str  # the authority's certificate: what clients trust
    cert: str  # the server's certificate (chain: itself, then the authority's)
    key: str  # the server's private key


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "OpenDDB local"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alternative_names(hosts: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
             days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days)))


def make_certificates(folder: str, hosts: list[str], days: int = 825) -> CertificateFiles:
    """Write openddb-ca.pem, openddb-cert.pem and openddb-key.pem into `folder` (made if missing): a new authority
    and a server certificate for `hosts` (names or IP addresses) valid for `days` (825: the most Apple's clients
    accept for a server certificate)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("OpenDDB local CA")
    ca = (_builder(ca_name, ca_name, ca_key, days)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(_name(hosts[0]), ca_name, key, days)
            .add_extension(_alternative_names(hosts), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    files = CertificateFiles(*(os.path.join(folder, name)
                               for name in ("openddb-ca.pem", "openddb-cert.pem", "openddb-key.pem")))
    pem = serialization.Encoding.PEM
    _write(files.ca, ca.public_bytes(pem), 0o644)
    _write(files.cert, cert.public_bytes(pem) + ca.public_bytes(pem), 0o644)
    _write(files.key, key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()), 0o600)
    return files


def _write(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)  # (an existing file keeps its mode otherwise)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
