"""Certificates made for a test run with the ``openssl`` CLI: a CA, and certificates it signs.

:func:`make_pki` writes, into one folder, a CA (``ca.pem``), a server certificate for 127.0.0.1 and
localhost (both as subject alternative names, so clients that verify the host name accept it) and a client
certificate for mutual TLS. Private keys are PKCS#8 PEM encrypted with a password (a file-based PEM
keystore of Kafka requires ``ssl.key.password``); the CA's key never leaves the folder. Everything is
valid for a day: nothing here is meant to outlive a test session.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from peers.process import HOST, PeerError

DAYS = "1"


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files and the password of every private key but the CA's."""

    ca: Path  # the CA certificate: the trust anchor clients and the broker load
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    key_password: str

    @property
    def server_keystore(self) -> Path:
        """Key and certificate chain in one file: Kafka's ``ssl.keystore.type=PEM`` file."""
        return self.server_key.with_name("server-keystore.pem")


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise PeerError(f"openssl {args[0]} failed: {done.stderr.strip()}")


# How a key is encrypted (``openssl pkcs8`` options). Java's PEM keystore reads PBES1 only (PBES2 gives
# "PBES2 SecretKeyFactory not available" on Java 17), so the broker's key uses PBE with SHA-1 and 3DES;
# the client's (read by librdkafka's OpenSSL) uses PBES2 with AES-256.
JAVA_READABLE = ("-v1", "PBE-SHA1-3DES")
MODERN = ("-v2", "aes-256-cbc")


def _signed(
    folder: Path, name: str, subject: str, extensions: str, password: str, cipher: tuple[str, str]
) -> tuple[Path, Path]:
    """A key (encrypted PKCS#8) and a certificate signed by the folder's CA, with ``extensions``."""
    key, plain, pem, ext = f"{name}.key", f"{name}-plain.key", f"{name}.pem", f"{name}.ext"
    (folder / ext).write_text(extensions)
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", plain, cwd=folder)
    secret = f"pass:{password}"
    _openssl("pkcs8", "-topk8", "-in", plain, "-out", key, "-passout", secret, *cipher, cwd=folder)
    (folder / plain).unlink()
    csr = ["-new", "-key", key, "-passin", secret, "-subj", subject, "-out", f"{name}.csr"]
    _openssl("req", *csr, cwd=folder)
    sign = ["-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"]
    _openssl("x509", *sign, "-days", DAYS, "-sha256", "-extfile", ext, "-out", pem, cwd=folder)
    return folder / pem, folder / key


def make_pki(folder: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate, in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    ca = ["-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", DAYS]
    ca += ["-subj", "/CN=kobs test CA", "-addext", "basicConstraints=critical,CA:TRUE"]
    _openssl("req", *ca, "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)
    server_cert, server_key = _signed(
        folder,
        "server",
        "/CN=localhost",
        f"subjectAltName=IP:{HOST},DNS:localhost\nextendedKeyUsage=serverAuth\n",
        password,
        JAVA_READABLE,
    )
    client_cert, client_key = _signed(
        folder, "client", "/CN=kobs", "extendedKeyUsage=clientAuth\n", password, MODERN
    )
    pki = Pki(folder / "ca.pem", server_cert, server_key, client_cert, client_key, password)
    # the broker's keystore: its key, then its certificate and the CA's (the chain it presents)
    chain = server_key.read_text() + server_cert.read_text() + pki.ca.read_text()
    pki.server_keystore.write_text(chain)
    return pki
