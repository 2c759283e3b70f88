"""known_hosts files: parsed once per run, looked up by name; accept-new appends to them.

paramiko's HostKeys reads plain and hashed lines but skips `@revoked` and `@cert-authority` lines
(and does not match `*`/`?`/`!` patterns), so a revoked key would look unknown and a host CA would
be invisible. This reader keeps all three kinds: a revoked key is refused, and a host that a
`@cert-authority` line covers is reported (the paramiko path cannot check host certificates: that
host needs `--ssh openssh`) and is never written to known_hosts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import threading
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from bsdcrypt.ssh.errors import SSHError
from bsdcrypt.ssh.files import read_regular


def fingerprint(blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def short_type(key_type: str) -> str:
    return {
        "ssh-ed25519": "ED25519",
        "ssh-rsa": "RSA",
        "rsa-sha2-256": "RSA",
        "rsa-sha2-512": "RSA",
    }.get(key_type, "ECDSA" if key_type.startswith("ecdsa") else key_type)


def known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


@dataclass(frozen=True)
class KnownKey:
    key_type: str
    blob: bytes
    where: str  # FILE:LINE
    revoked: bool = False
    authority: bool = False  # a @cert-authority line: a CA that signs host certificates, not a host key


@dataclass
class _HashedEntry:
    salt: bytes
    digest: bytes
    key: KnownKey


@dataclass
class _PatternEntry:
    patterns: list[str]
    key: KnownKey

    def matches(self, name: str) -> bool:
        hit = False
        for pat in self.patterns:
            negated = pat.startswith("!")
            if fnmatchcase(name, (pat[1:] if negated else pat).lower()):
                if negated:
                    return False
                hit = True
        return hit


MAX_KNOWN_HOSTS = 64 << 20  # 64 MiB: ~100,000 hosts with a few keys each


class KnownHosts:
    """The known_hosts files of a run, each parsed once; lookups are dict hits for plain names.

    Keys are compared as raw blobs, never turned into key objects, so loading a large file is cheap.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: set[str] = set()
        self._exact: dict[str, list[KnownKey]] = {}
        self._hashed: list[_HashedEntry] = []
        self._patterns: list[_PatternEntry] = []

    def load(self, path: str) -> None:
        """Read `path` once (a missing file is empty; a FIFO, device or oversized file is an SSHError)."""
        with self._lock:
            if path in self._loaded:
                return
            data = read_regular(path, MAX_KNOWN_HOSTS, "known_hosts file")
            self._loaded.add(path)
            if data is None:
                return
            text = data.decode("utf-8", errors="surrogateescape")  # every byte kept
            for number, line in enumerate(text.splitlines(), start=1):
                self._add_line(line, f"{path}:{number}")

    def _add_line(self, line: str, where: str) -> None:
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            return
        revoked = authority = False
        if fields[0].startswith("@"):
            if fields[0] == "@revoked":
                revoked = True
            elif fields[0] == "@cert-authority":
                authority = True
            else:
                return  # a marker ssh does not know: it skips the line too
            fields = fields[1:]
        if len(fields) < 3:
            return
        hosts, key_type, b64 = fields[0], fields[1], fields[2]
        try:
            blob = base64.b64decode(b64, validate=True)
        except ValueError:
            return
        key = KnownKey(key_type, blob, where, revoked, authority)
        if hosts.startswith("|1|"):
            parts = hosts.split("|")
            if len(parts) != 4:
                return
            try:
                salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
            except ValueError:
                return
            self._hashed.append(_HashedEntry(salt, digest, key))
            return
        names = hosts.split(",")
        if any(ch in hosts for ch in "*?!"):
            self._patterns.append(_PatternEntry(names, key))
        else:
            for name in names:
                self._exact.setdefault(name.lower(), []).append(key)

    def lookup(self, name: str) -> list[KnownKey]:
        """Every line for `name`: host keys, revoked keys and host CAs alike (see KnownKey)."""
        name = name.lower()
        with self._lock:
            found = list(self._exact.get(name, ()))
            hashed = list(self._hashed)
            patterns = list(self._patterns)
        if hashed:
            encoded = name.encode("utf-8", "surrogateescape")
            found += [e.key for e in hashed if hmac.compare_digest(hmac.digest(e.salt, encoded, "sha1"), e.digest)]
        found += [e.key for e in patterns if e.matches(name)]
        return found

    def add(self, path: str, name: str, key_type: str, blob: bytes, hashed: bool) -> None:
        """Append a key (accept-new); the in-memory index learns it too."""
        if hashed:
            salt = os.urandom(20)
            digest = hmac.digest(salt, name.encode("utf-8", "surrogateescape"), "sha1")
            host_field = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
        else:
            host_field = name
        line = f"{host_field} {key_type} {base64.b64encode(blob).decode()}\n"
        with self._lock:
            target = Path(path)
            try:
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                with target.open("a", encoding="utf-8", errors="surrogateescape") as fh:
                    fh.write(line)
            except OSError as exc:
                raise SSHError("config", f"cannot add the host key to {path}: {exc.strerror}") from exc
            self._exact.setdefault(name.lower(), []).append(KnownKey(key_type, blob, f"{path}:new"))
