"""Key exchange for bsdcrypt.ssh.direct: KEXINIT (RFC 4253 7.1), ECDH over Curve25519 (RFC 8731) or
NIST P-256 (RFC 5656), the exchange hash, the host key's signature and the session keys (7.2).

Only AES-GCM ciphers are offered (no separate MAC to compute); a server that shares no algorithm with
this list is `Unsupported`, and the caller uses paramiko instead (older sshd: CTR and HMAC, DH groups).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import paramiko
from cryptography.hazmat.primitives.asymmetric import ec, x25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bsdcrypt.ssh.transport import session_key
from bsdcrypt.ssh.wireformat import Reader, mpint, name_list, string

MSG_KEXINIT = 20
MSG_NEWKEYS = 21
MSG_KEX_ECDH_INIT = 30
MSG_KEX_ECDH_REPLY = 31

KEX = ("curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256")
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
CIPHER_KEY_SIZE = {"aes128-gcm@openssh.com": 16, "aes256-gcm@openssh.com": 32}
# Never used with an AEAD cipher (RFC 5647 7.1: its MAC is implicit), but the list must not be empty.
MACS = ("hmac-sha2-256-etm@openssh.com", "hmac-sha2-256")
EXT_INFO_C = "ext-info-c"  # RFC 8308: ask for server-sig-algs (which RSA signatures it takes)
STRICT_C = "kex-strict-c-v00@openssh.com"  # OpenSSH's answer to Terrapin (CVE-2023-48795)
STRICT_S = "kex-strict-s-v00@openssh.com"
HOST_KEY_TYPE = {"rsa-sha2-512": "ssh-rsa", "rsa-sha2-256": "ssh-rsa"}
MIN_RSA_BITS = 1024  # ssh's RequiredRSASize default (ssh_config(5), OpenSSH 9.1 and later)


class Unsupported(Exception):
    """The server offers none of this client's algorithms for one of the lists (named in the message)."""


class KexError(Exception):
    """The key exchange failed: a bad reply, or a host key signature that does not verify."""


@dataclass(frozen=True)
class Choice:
    kex: str
    host_key: str
    cipher_out: str
    cipher_in: str
    strict: bool


def kexinit(host_keys: tuple[str, ...], first: bool) -> bytes:
    """The client's KEXINIT payload; the first one also asks for EXT_INFO and strict key exchange."""
    kex = KEX + ((EXT_INFO_C, STRICT_C) if first else ())
    return b"".join((
        bytes((MSG_KEXINIT,)), os.urandom(16), name_list(kex), name_list(host_keys),
        name_list(CIPHERS), name_list(CIPHERS), name_list(MACS), name_list(MACS),
        name_list(("none",)), name_list(("none",)), string(b""), string(b""), b"\0", bytes(4),
    ))


def _pick(ours: tuple[str, ...], theirs: list[str], what: str) -> str:
    for name in ours:
        if name in theirs:
            return name
    raise Unsupported(f"no common {what} (the server offers {','.join(theirs)[:200]})")


def choose(server_kexinit: bytes, host_keys: tuple[str, ...], first: bool) -> Choice:
    """RFC 4253 7.1: for each list, the client's first algorithm that the server also has."""
    r = Reader(server_kexinit, 17)  # the message number and the cookie
    kex, keys, c2s, s2c = r.names(), r.names(), r.names(), r.names()
    r.names(), r.names()  # MACs: not negotiated with an AEAD cipher
    comp_c2s, comp_s2c = r.names(), r.names()
    r.names(), r.names()  # languages
    r.boolean()  # first_kex_packet_follows: the server speaks second in ECDH, so it has nothing to guess
    r.u32()
    if "none" not in comp_c2s or "none" not in comp_s2c:
        raise Unsupported("the server wants compression")
    return Choice(_pick(KEX, kex, "key exchange"), _pick(host_keys, keys, "host key type"),
                  _pick(CIPHERS, c2s, "cipher"), _pick(CIPHERS, s2c, "cipher"), first and STRICT_S in kex)


class Exchange:
    """One ECDH exchange: the client's ephemeral key, then the server's reply checked and turned into
    (K as an mpint, H)."""

    def __init__(self, kex: str) -> None:
        self.kex = kex
        if kex.startswith("curve25519"):
            self._x = x25519.X25519PrivateKey.generate()
            self.public = self._x.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        else:
            self._ec = ec.generate_private_key(ec.SECP256R1())
            self.public = self._ec.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)

    def init_message(self) -> bytes:
        return bytes((MSG_KEX_ECDH_INIT,)) + string(self.public)

    def shared(self, server_public: bytes) -> bytes:
        try:
            if self.kex.startswith("curve25519"):
                if len(server_public) != 32:
                    raise KexError(f"the server's Curve25519 key is {len(server_public)} bytes, not 32")
                secret = self._x.exchange(x25519.X25519PublicKey.from_public_bytes(server_public))
            else:
                if len(server_public) != 65 or server_public[0] != 4:  # RFC 5656 allows, OpenSSH sends, no other
                    raise KexError("the server's P-256 key is not an uncompressed point")
                point = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), server_public)
                secret = self._ec.exchange(ec.ECDH(), point)
        except ValueError as exc:  # a low-order point (all-zero secret) or a point not on the curve
            raise KexError(f"the server's ECDH key is unusable: {exc}") from None
        return mpint(secret)

    def hash(self, v_c: bytes, v_s: bytes, i_c: bytes, i_s: bytes, host_key: bytes, server_public: bytes,
             k: bytes) -> bytes:
        return hashlib.sha256(b"".join((
            string(v_c), string(v_s), string(i_c), string(i_s), string(host_key), string(self.public),
            string(server_public), k,
        ))).digest()


def verify_host_key(algorithm: str, host_key: bytes, signature: bytes, h: bytes) -> str:
    """Check the server's signature of H with its host key, as `algorithm` (the negotiated one) says;
    returns the key's type (as known_hosts names it)."""
    try:
        key_type = Reader(host_key).text()
        sig_alg = Reader(signature).text()
    except Exception:
        raise KexError("the server's host key or signature is malformed") from None
    want = HOST_KEY_TYPE.get(algorithm, algorithm)
    if key_type != want:
        raise KexError(f"the server sent a {key_type[:40]!r} host key for {algorithm}")
    if sig_alg != algorithm:
        raise KexError(f"the server signed with {sig_alg[:40]!r}, not the {algorithm} agreed")
    try:
        key = paramiko.PKey.from_type_string(key_type, host_key)
        bits = key.get_bits() if key_type == "ssh-rsa" else MIN_RSA_BITS
        good = bits >= MIN_RSA_BITS and key.verify_ssh_sig(h, paramiko.Message(signature))
    except Exception as exc:
        raise KexError(f"the server's {key_type} host key is unusable: {type(exc).__name__}") from None
    if bits < MIN_RSA_BITS:
        raise KexError(f"the server's RSA host key has {bits} bits; ssh requires {MIN_RSA_BITS} at least")
    if not good:
        raise KexError("the server's host key signature does not verify")
    return key_type


def session_keys(k: bytes, h: bytes, session_id: bytes, choice: Choice) -> tuple[bytes, bytes, bytes, bytes]:
    """(iv out, key out, iv in, key in) for a client (RFC 4253 7.2: A/C client to server, B/D back)."""
    kh = k + h
    size_out = CIPHER_KEY_SIZE[choice.cipher_out]
    size_in = CIPHER_KEY_SIZE[choice.cipher_in]
    sha = hashlib.sha256
    return (session_key(sha, kh, "A", session_id, 12), session_key(sha, kh, "C", session_id, size_out),
            session_key(sha, kh, "B", session_id, 12), session_key(sha, kh, "D", session_id, size_in))
