"""The fleet's BMC CA (made once per fleet) and a certificate per BMC with its IP as SAN.

Extensions are the ones Python 3.13's strict X.509 verification (VERIFY_X509_STRICT) asks for,
so clients verify with `ssl.create_default_context(cafile=ca.pem)` and no relaxed flags.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
_VALID = datetime.timedelta(days=365)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.touch(mode=0o600)
    path.write_bytes(pem)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, ca: bool
) -> x509.CertificateBuilder:
    """A certificate of ``key`` for ``subject``: a CA's (signs certificates and CRLs) or a server's
    (signs and enciphers keys), with the constraints and key usage strict verification asks for."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def ensure_ca(directory: Path) -> Path:
    """The CA certificate under directory, made on first use."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_path = directory / CA_CERT
    if cert_path.exists() and (directory / CA_KEY).exists():
        return cert_path
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufleet BMC CA")])
    cert = _builder(name, name, key, ca=True).sign(key, hashes.SHA256())
    _write_key(directory / CA_KEY, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path


def issue(directory: Path, name: str, address: str, dns_name: str | None = None) -> tuple[Path, Path]:
    """(certificate, key) for the BMC of node `name` at `address`, signed by the fleet CA.

    The certificate names the address (IP SAN) and `dns_name` (default `<name>-bmc`, the BMC's own
    host name); a switch passes its hostname."""
    dns_name = dns_name or f"{name}-bmc"
    ca_path = ensure_ca(directory)
    ca_cert = x509.load_pem_x509_certificate(ca_path.read_bytes())
    ca_key = serialization.load_pem_private_key((directory / CA_KEY).read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{directory / CA_KEY} is not the EC key this CA was made with")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_name)])
    cert = (
        _builder(subject, ca_cert.subject, key, ca=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(address)), x509.DNSName(dns_name)]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, key)
    return cert_path, key_path
