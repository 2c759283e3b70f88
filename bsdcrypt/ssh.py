"""SSH hosts: one TCP connection, one SSH session, one exec per `run` (paramiko lives only here).

`SSHHost.run(script)` execs `/bin/sh -s` (no pty) and sends the script on stdin, so it works
whatever the remote login shell is (root's shell is csh/tcsh on older FreeBSD). The user's
OpenSSH client config is honoured for HostName, User, Port, IdentityFile, IdentitiesOnly,
ProxyJump, ProxyCommand, ConnectTimeout, UserKnownHostsFile, GlobalKnownHostsFile,
HostKeyAlias, HashKnownHosts and StrictHostKeyChecking (accept-new/no act as accept-new; a
changed key is never accepted). Authentication: ssh-agent, then key files; never passwords.

One `SSHContext` is shared by every host of a run: the config is parsed once, each
known_hosts file is loaded once, and key files are loaded once.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import hmac
import logging
import os
import shlex
import socket
import threading
import time
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import paramiko
from paramiko.packet import Packetizer

from bsdcrypt.errors import HostError
from bsdcrypt.host import RunResult
from bsdcrypt.hostsfile import SpecError, split_spec

# paramiko logs handshake failures with tracebacks; our callers get one-line errors instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

DEFAULT_TIMEOUT = 30.0
MAX_OUTPUT = 32 * 1024 * 1024
REMOTE_COMMAND = "/bin/sh -s"
DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519")
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
MAX_PROXY_JUMPS = 8


class SSHError(HostError):
    """A host could not be reached, verified, logged into, or did not finish the command.

    `kind` is a stable short code: resolve, refused, unreachable, timeout, no-ssh, closed,
    protocol, hostkey-unknown, hostkey-changed, hostkey-revoked, auth, no-keys, proxy, cut-off, config.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# --------------------------------------------------------------------------- known_hosts


def fingerprint(blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _short_type(key_type: str) -> str:
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
            if fnmatchcase(name, pat[1:] if negated else pat):
                if negated:
                    return False
                hit = True
        return hit


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
        with self._lock:
            if path in self._loaded:
                return
            self._loaded.add(path)
            try:
                text = Path(path).read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                return
            except OSError as exc:
                raise SSHError("config", f"cannot read known_hosts file {path}: {exc.strerror}") from exc
            for number, line in enumerate(text.splitlines(), start=1):
                self._add_line(line, f"{path}:{number}")

    def _add_line(self, line: str, where: str) -> None:
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            return
        revoked = False
        if fields[0].startswith("@"):
            if fields[0] == "@revoked":
                revoked = True
            else:  # @cert-authority: certificates are not supported; such lines are not host keys
                return
            fields = fields[1:]
        if len(fields) < 3:
            return
        hosts, key_type, b64 = fields[0], fields[1], fields[2]
        try:
            blob = base64.b64decode(b64, validate=True)
        except ValueError:
            return
        key = KnownKey(key_type, blob, where, revoked)
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
        name = name.lower()
        found = list(self._exact.get(name, ()))
        if self._hashed:
            encoded = name.encode()
            found += [
                e.key for e in self._hashed if hmac.digest(e.salt, encoded, "sha1") == e.digest
            ]
        found += [e.key for e in self._patterns if e.matches(name)]
        return found

    def add(self, path: str, name: str, key_type: str, blob: bytes, hashed: bool) -> None:
        """Append a key (accept-new); the in-memory index learns it too."""
        if hashed:
            salt = os.urandom(20)
            digest = hmac.digest(salt, name.encode(), "sha1")
            host_field = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
        else:
            host_field = name
        line = f"{host_field} {key_type} {base64.b64encode(blob).decode()}\n"
        with self._lock:
            target = Path(path)
            try:
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                with target.open("a", encoding="utf-8") as fh:
                    fh.write(line)
            except OSError as exc:
                raise SSHError("config", f"cannot add the host key to {path}: {exc.strerror}") from exc
            self._exact.setdefault(name.lower(), []).append(KnownKey(key_type, blob, f"{path}:new"))


# --------------------------------------------------------------------------- run context


@dataclass
class Target:
    """Where and how to connect, after the client config was applied."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: list[str]
    identities_only: bool
    proxy_jump: str | None
    proxy_command: str | None
    connect_timeout: float | None
    user_known_hosts: list[str]
    global_known_hosts: list[str]
    host_key_alias: str | None
    hash_known_hosts: bool
    accept_new: bool

    @property
    def known_hosts_name(self) -> str:
        return known_hosts_name(self.host_key_alias or self.hostname, self.port)


def _expand_path(path: str, target: dict[str, str]) -> str:
    if "%" not in path:  # nothing to substitute (the common case): skip the token table
        return os.path.expanduser(path)
    for token, value in (("%d", str(Path.home())), ("%h", target["h"]), ("%p", target["p"]),
                         ("%r", target["r"]), ("%u", target["u"]), ("%%", "%")):
        path = path.replace(token, value)
    return os.path.expanduser(path)


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() in ("yes", "true", "on")


class _SSHConfig(paramiko.SSHConfig):
    """paramiko's SSHConfig, minus a per-host cost: `_tokenize` looks up the local user, host name
    and home folder and hashes them for every value of every lookup, even when the value holds
    no token. Every token starts with `%` or is `~`, so a value with neither is returned as is;
    values with tokens still go through paramiko."""

    def _tokenize(self, config: Any, target_hostname: str, key: str, value: Any) -> Any:
        if isinstance(value, str) and "%" not in value and "~" not in value:
            return value
        return super()._tokenize(config, target_hostname, key, value)  # type: ignore[misc]


@dataclass
class SSHContext:
    """What every host of one run shares: config, known_hosts, loaded keys, policy."""

    config_path: str | None = None
    accept_new: bool = False
    use_agent: bool = True
    config: paramiko.SSHConfig = field(init=False)
    known_hosts: KnownHosts = field(init=False, default_factory=KnownHosts)
    _keys: dict[str, paramiko.PKey | str] = field(init=False, default_factory=dict)
    _key_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _user_config: bool = field(init=False, default=False)
    _local_user: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.config = _SSHConfig()
        paths: list[str]
        if self.config_path is not None:
            path = os.path.expanduser(self.config_path)
            if not os.path.isfile(path):
                raise SSHError("config", f"no ssh config file at {self.config_path}")
            paths = [path]
        else:
            candidates = (os.path.expanduser("~/.ssh/config"), "/etc/ssh/ssh_config")
            paths = [p for p in candidates if os.path.isfile(p)]
        for path in paths:
            try:
                with open(path, encoding="utf-8") as fh:
                    self.config.parse(fh)
            except (OSError, UnicodeDecodeError, paramiko.ConfigParseError) as exc:
                raise SSHError("config", f"cannot use ssh config {path}: {exc}") from exc
            except Exception as exc:  # paramiko raises bare exceptions on odd syntax
                raise SSHError("config", f"cannot parse ssh config {path}: {exc}") from exc

    def target(self, alias: str, user: str | None = None, port: int | None = None) -> Target:
        try:
            opts: dict[str, Any] = dict(self._lookup(alias, user, port))
        except Exception as exc:  # Match exec failures and the like
            raise SSHError("config", f"ssh config lookup for {alias} failed: {exc}") from exc
        hostname = str(opts.get("hostname") or alias)
        the_port = port if port is not None else int(opts.get("port", 22))
        local_user = self.local_user()
        the_user = user or str(opts.get("user") or "") or local_user
        tokens = {"h": hostname, "p": str(the_port), "r": the_user, "u": local_user}
        ids = opts.get("identityfile")
        identity_files = [_expand_path(p, tokens) for p in ids] if ids else [
            os.path.expanduser(p) for p in DEFAULT_IDENTITIES
        ]
        ukh = str(opts.get("userknownhostsfile") or " ".join(DEFAULT_USER_KNOWN_HOSTS)).split()
        gkh = str(opts.get("globalknownhostsfile") or " ".join(DEFAULT_GLOBAL_KNOWN_HOSTS)).split()
        jump = opts.get("proxyjump")
        proxy = opts.get("proxycommand")
        ct = opts.get("connecttimeout")
        strict = str(opts.get("stricthostkeychecking") or "").lower()
        return Target(
            alias=alias,
            hostname=hostname,
            port=the_port,
            user=the_user,
            identity_files=identity_files,
            identities_only=_yes(opts.get("identitiesonly")),
            proxy_jump=None if not jump or str(jump).lower() == "none" else str(jump),
            proxy_command=None if not proxy or str(proxy).lower() == "none" else str(proxy),
            connect_timeout=float(ct) if ct and str(ct).isdigit() and int(ct) > 0 else None,
            user_known_hosts=[_expand_path(p, tokens) for p in ukh if p.lower() != "none"],
            global_known_hosts=[_expand_path(p, tokens) for p in gkh if p.lower() != "none"],
            host_key_alias=str(opts["hostkeyalias"]) if opts.get("hostkeyalias") else None,
            hash_known_hosts=_yes(opts.get("hashknownhosts")),
            accept_new=self.accept_new or strict in ("accept-new", "no", "off"),
        )

    def local_user(self) -> str:
        """The local login name, looked up once per run (getpass may read the passwd database)."""
        if self._local_user is None:
            try:
                self._local_user = getpass.getuser()
            except (OSError, KeyError) as exc:
                raise SSHError("config", f"cannot tell the local user name: {exc}") from exc
        return self._local_user

    def _lookup(self, alias: str, user: str | None, port: int | None) -> Any:
        """Config lookup; a user or port given on the host line wins over the config, as `ssh -l/-p` do,
        and is what %r/%p expand to in ProxyCommand/ProxyJump."""
        private = getattr(self.config, "_lookup", None)
        if (user is None and port is None) or private is None:
            return self.config.lookup(alias)
        try:
            seed = paramiko.SSHConfigDict()
            if port is not None:
                seed["port"] = str(port)
            if user:
                seed["user"] = user
            first = private(alias, seed)
            if "hostname" not in first:
                first["hostname"] = alias
            return private(alias, first, canonical=False, final=True)
        except TypeError:  # a paramiko whose private API changed
            return self.config.lookup(alias)

    def key_file(self, path: str) -> paramiko.PKey | str:
        """A loaded private key, or a one-line reason it cannot be used (cached per run)."""
        with self._key_lock:
            cached = self._keys.get(path)
        if cached is not None:
            return cached
        result: paramiko.PKey | str
        try:
            result = paramiko.PKey.from_path(path)
        except FileNotFoundError:
            result = "missing"
        except paramiko.PasswordRequiredException:
            result = f"{path} is passphrase-protected: load it into ssh-agent"
        except Exception as exc:  # unknown key types, corrupt files
            result = f"{path} cannot be used: {exc}"
        with self._key_lock:
            self._keys[path] = result
        return result


_default_context: SSHContext | None = None
_default_lock = threading.Lock()


def default_context() -> SSHContext:
    global _default_context
    with _default_lock:
        if _default_context is None:
            # For `--host user@host` on single-host commands; fleet-audit has options for these.
            _default_context = SSHContext(
                os.environ.get("BSDCRYPT_SSH_CONFIG") or None,
                accept_new=os.environ.get("BSDCRYPT_ACCEPT_NEW") == "1",
            )
        return _default_context


# --------------------------------------------------------------------------- the host


class _WireSocket:
    """The TCP socket as paramiko's packet layer sees it: buffered reads, quick ACKs (Linux).

    paramiko reads every packet with two exact-size `recv` calls (length, then the rest), so a
    host costs ~35 reads, each a system call that also drops and re-takes the GIL. One `recv`
    of up to 16 KiB takes whatever the kernel holds (usually a whole flight of packets) and
    the following reads are served from it.

    After authentication sshd writes two small packets back to back (the host-keys notice, then
    the channel-open confirmation); with Nagle on the server side and the client's delayed ACK,
    the second one waits ~40 ms for an ACK the client has no reason to send. Re-arming
    TCP_QUICKACK after each read acknowledges at once and removes that stall from every host.
    """

    __slots__ = ("_sock", "send", "_buf", "_pos")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.send = sock.send  # paramiko's packet writer: straight to the socket, no __getattr__
        self._buf = b""
        self._pos = 0

    def recv(self, n: int) -> bytes:
        buf, pos = self._buf, self._pos
        if not buf:
            data = self._sock.recv(max(n, _READ_SIZE))
            self._quickack()
            if len(data) <= n:
                return data
            buf, pos = data, 0
        stop = pos + n
        if stop >= len(buf):  # the rest of the buffer: let it go
            self._buf, self._pos = b"", 0
        else:
            self._buf, self._pos = buf, stop
        return buf[pos:stop] if pos or stop < len(buf) else buf

    def _quickack(self) -> None:
        if _TCP_QUICKACK:
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
            except OSError:
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


_READ_SIZE = 16384
_TCP_QUICKACK: int = getattr(socket, "TCP_QUICKACK", 0)


class _DeadlinePacketizer(Packetizer):
    """paramiko's Packetizer with the handshake timeout kept as a deadline.

    paramiko starts a `threading.Timer` thread per connection for it (one more thread to create,
    schedule and cancel for every host); the packet reader already wakes up every 0.1 s to call
    `handshake_timed_out()`, so comparing the clock there gives the same timeout without a thread.
    """

    _hs_deadline: float | None = None
    _hs_done: bool = False

    def start_handshake(self, timeout: float) -> None:
        if self._hs_deadline is None:
            self._hs_deadline = time.monotonic() + float(timeout)

    def handshake_timed_out(self) -> bool:
        deadline = self._hs_deadline
        return deadline is not None and not self._hs_done and time.monotonic() >= deadline

    def complete_handshake(self) -> None:
        if self._hs_deadline is not None:
            self._hs_done = True


def _public_blob_of_file(path: str) -> bytes | None:
    try:
        fields = Path(path + ".pub").read_text(encoding="utf-8").split()
        return base64.b64decode(fields[1]) if len(fields) >= 2 else None
    except (OSError, ValueError):
        return None


def _host_key_algorithms(known: list[KnownKey]) -> tuple[str, ...]:
    """Like ssh(1): ask first for the key types already known for this host."""
    preferred: list[str] = list(getattr(paramiko.Transport, "_preferred_keys"))  # noqa: B009
    first: list[str] = []
    for k in known:
        algs = ["rsa-sha2-512", "rsa-sha2-256"] if k.key_type == "ssh-rsa" else [k.key_type]
        first += [a for a in algs if a in preferred and a not in first]
    return tuple(first + [a for a in preferred if a not in first])


def _cipher_order() -> tuple[str, ...]:
    """AES-GCM first: an AEAD needs no separate MAC, and paramiko checks MACs byte by byte in Python
    (about a third of its per-packet CPU). CTR modes stay as the fallback for older servers."""
    available: list[str] = list(getattr(paramiko.Transport, "_preferred_ciphers"))  # noqa: B009
    gcm = [c for c in ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com") if c in available]
    return tuple(gcm + [c for c in available if c not in gcm])


_CIPHERS = _cipher_order()


class SSHHost:
    """A host reached over SSH. Connects on the first `run`; `abort()` may be called from any thread."""

    def __init__(
        self,
        alias: str,
        *,
        user: str | None = None,
        port: int | None = None,
        context: SSHContext | None = None,
        spec: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self.context = context or default_context()
        self.target = self.context.target(alias, user, port)
        self.name = alias
        self.spec = spec or alias
        self.timeout = timeout
        self.phase = "connect"
        self.connections = 0
        self.execs = 0
        self._transport: paramiko.Transport | None = None
        self._sock: Any = None
        self._jump: SSHHost | None = None
        self._aborted = False
        self._deadline = float("inf")
        self._depth = 0

    @classmethod
    def from_spec(cls, spec: str, context: SSHContext | None = None, timeout: float | None = None) -> SSHHost:
        try:
            user, host, port = split_spec(spec)
        except SpecError as exc:
            raise SSHError("config", f"bad host {spec!r}: {exc}") from exc
        return cls(host, user=user, port=port, context=context, spec=spec, timeout=timeout)

    # -- deadline helpers

    def _remaining(self) -> float:
        left = self._deadline - time.monotonic()
        if self._aborted or left <= 0:
            raise self._timeout_error()
        return left

    def _timeout_error(self) -> SSHError:
        total = f" after {self.timeout:g}s" if self.timeout else ""
        if self.phase == "banner":
            t = self.target
            return SSHError("no-ssh", f"timed out{total} waiting for the SSH banner: {t.hostname} port "
                            f"{t.port} accepts TCP but does not speak SSH (or sshd is overloaded)")
        return SSHError("timeout", f"timed out{total} during {self.phase}")

    def abort(self) -> None:
        """Unblock every wait of this host (watchdog); later calls fail as a timeout."""
        self._aborted = True
        sock = self._sock
        if sock is not None:
            try:
                if isinstance(sock, socket.socket):
                    sock.shutdown(socket.SHUT_RDWR)
                else:
                    sock.close()
            except OSError:
                pass
        if self._jump is not None:
            self._jump.abort()

    # -- connect

    def connect(self, deadline: float | None = None) -> paramiko.Transport:
        if self._transport is not None and self._transport.is_active():
            return self._transport
        if deadline is not None:
            self._deadline = deadline
        elif self._deadline == float("inf"):
            self._deadline = time.monotonic() + (self.timeout or DEFAULT_TIMEOUT)
        try:
            return self._connect()
        except SSHError:
            self._close_quietly()
            raise
        except Exception as exc:
            self._close_quietly()
            if self._aborted or time.monotonic() >= self._deadline:
                raise self._timeout_error() from exc
            raise self._map_error(exc) from exc

    def _map_error(self, exc: BaseException) -> SSHError:
        t = self.target
        where = f"{t.hostname} port {t.port}"
        if isinstance(exc, socket.gaierror):
            return SSHError("resolve", f"cannot resolve {t.hostname}: {exc.strerror}")
        if isinstance(exc, ConnectionRefusedError):
            return SSHError("refused", f"connection refused by {where}")
        if isinstance(exc, TimeoutError | socket.timeout):
            return SSHError("timeout", f"timed out during {self.phase} ({where})")
        if isinstance(exc, paramiko.BadAuthenticationType):
            allowed = ", ".join(exc.allowed_types) or "none"
            return SSHError("auth", f"{t.user}@{where} does not accept public keys (allows: {allowed})")
        if isinstance(exc, paramiko.AuthenticationException):
            return SSHError("auth", f"authentication failed for {t.user}@{t.hostname}: {exc}")
        if isinstance(exc, paramiko.ProxyCommandFailure):
            return SSHError("proxy", f"ProxyCommand failed: {exc}")
        if isinstance(exc, paramiko.SSHException):
            text = str(exc)
            if "protocol banner" in text:
                if self.phase == "banner" and time.monotonic() >= self._banner_deadline - 0.05:
                    return SSHError("no-ssh", f"{where} accepted TCP but sent no SSH banner "
                                    f"within {self._banner_wait:g}s (not an SSH server?)")
                return SSHError("closed", f"{where} closed the connection before the SSH banner")
            if "Indecipherable protocol version" in text or "Invalid SSH banner" in text:
                return SSHError("no-ssh", f"{where} does not speak SSH ({text[:80]})")
            if "Incompatible" in text or "no acceptable" in text.lower():
                return SSHError("protocol", f"{where}: {text}")
            return SSHError("protocol", f"SSH error during {self.phase} with {where}: {text}")
        if isinstance(exc, EOFError | ConnectionResetError | BrokenPipeError):
            return SSHError("closed", f"{where} closed the connection during {self.phase}")
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc) or type(exc).__name__
            kind = "unreachable" if exc.errno in (101, 113, 65, 51) else "closed"
            return SSHError(kind, f"{reason} ({where}, during {self.phase})")
        return SSHError("protocol", f"{type(exc).__name__} during {self.phase} with {where}: {exc}")

    def _open_socket(self) -> Any:
        t = self.target
        if self._via is not None:  # a later hop of a ProxyJump chain
            via = self._via._transport
            assert via is not None
            return via.open_channel(
                "direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0), timeout=self._remaining()
            )
        if t.proxy_jump:
            if self._depth >= MAX_PROXY_JUMPS:
                raise SSHError("proxy", f"ProxyJump chain longer than {MAX_PROXY_JUMPS} hops (a loop?)")
            hops = [h.strip() for h in t.proxy_jump.split(",") if h.strip()]
            prev: SSHHost | None = None
            for hop in hops:
                user, host, port = split_spec(hop.removeprefix("ssh://"))
                jump = SSHHost(
                    host, user=user, port=port, context=self.context, spec=hop, timeout=self.timeout
                )
                jump._depth = self._depth + 1
                if prev is not None:
                    jump._via = prev
                jump._deadline = self._deadline
                self.phase = f"ProxyJump via {hop}"
                try:
                    jump.connect(self._deadline)
                except SSHError as exc:
                    raise SSHError(exc.kind, f"ProxyJump {hop}: {exc}") from exc
                prev = jump
            assert prev is not None
            self._jump = prev
            transport = prev._transport
            assert transport is not None
            self.phase = "connect"
            return transport.open_channel(
                "direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0), timeout=self._remaining()
            )
        if t.proxy_command:
            cmd = t.proxy_command
            for token, value in (("%h", t.hostname), ("%p", str(t.port)), ("%r", t.user), ("%%", "%")):
                cmd = cmd.replace(token, value)
            return paramiko.ProxyCommand("/bin/sh -c " + shlex.quote("exec " + cmd))
        self.phase = "name resolution"
        infos = socket.getaddrinfo(t.hostname, t.port, type=socket.SOCK_STREAM)
        self.phase = "connect"
        last: BaseException | None = None
        for family, socktype, proto, _, addr in infos:
            sock = socket.socket(family, socktype, proto)
            self._sock = sock
            limit = self._remaining()
            if t.connect_timeout:
                limit = min(limit, t.connect_timeout)
            sock.settimeout(limit)
            try:
                sock.connect(addr)
            except OSError as exc:
                sock.close()
                last = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        assert last is not None
        raise last

    _via: SSHHost | None = None
    _banner_deadline = 0.0
    _banner_wait = 0.0

    def _connect(self) -> paramiko.Transport:
        t = self.target
        ctx = self.context
        self.phase = "connect"
        sock = self._open_socket()
        self._sock = sock
        self.connections += 1
        if self._aborted:
            raise self._timeout_error()
        for path in t.user_known_hosts + t.global_known_hosts:
            ctx.known_hosts.load(path)
        known = ctx.known_hosts.lookup(t.known_hosts_name)
        wire: Any = _WireSocket(sock) if isinstance(sock, socket.socket) else sock
        transport = paramiko.Transport(wire)
        if type(transport.packetizer) is Packetizer:
            transport.packetizer.__class__ = _DeadlinePacketizer
        self._transport = transport
        security = transport.get_security_options()
        security.key_types = _host_key_algorithms([k for k in known if not k.revoked])
        security.ciphers = _CIPHERS
        remaining = self._remaining()
        self._banner_wait = min(remaining, t.connect_timeout) if t.connect_timeout else remaining
        self._banner_deadline = time.monotonic() + self._banner_wait
        transport.banner_timeout = self._banner_wait
        transport.handshake_timeout = remaining
        transport.auth_timeout = remaining
        self.phase = "banner"
        event = threading.Event()
        transport.start_client(event=event)
        done = event.wait(self._remaining())
        if transport.remote_version:
            self.phase = "key exchange"
        if not done:
            raise self._timeout_error()
        if not transport.is_active():
            exc = transport.get_exception()
            raise exc if exc is not None else SSHError("closed", "SSH negotiation failed")
        self.phase = "host key check"
        self._check_host_key(transport, known)
        self.phase = "authentication"
        self._authenticate(transport)
        return transport

    def _check_host_key(self, transport: paramiko.Transport, known: list[KnownKey]) -> None:
        t = self.target
        key = transport.get_remote_server_key()
        blob = key.asbytes()
        key_type = key.get_name()
        name = t.known_hosts_name
        fp = f"{_short_type(key_type)} {fingerprint(blob)}"
        revoked = [k for k in known if k.revoked and k.blob == blob]
        if revoked:
            where = revoked[0].where
            raise SSHError("hostkey-revoked", f"host key of {name} is marked @revoked ({where}): {fp}")
        good = [k for k in known if not k.revoked]
        if any(k.blob == blob for k in good):
            return
        if good:
            other = good[0]
            raise SSHError(
                "hostkey-changed",
                f"HOST KEY CHANGED for {name}: it offers {fp}, but {other.where} has a different "
                f"{_short_type(other.key_type)} key (possible man-in-the-middle; "
                f"if the change is expected: ssh-keygen -R '{name}')",
            )
        if not t.accept_new:
            files = ", ".join(t.user_known_hosts[:1]) or "known_hosts"
            raise SSHError(
                "hostkey-unknown",
                f"host key of {name} is not in {files} ({fp}); verify it, then rerun with --accept-new",
            )
        if not t.user_known_hosts:
            raise SSHError("config", "--accept-new needs a UserKnownHostsFile to write to")
        self.context.known_hosts.add(t.user_known_hosts[0], name, key_type, blob, t.hash_known_hosts)

    def _authenticate(self, transport: paramiko.Transport) -> None:
        t = self.target
        ctx = self.context
        tried: list[str] = []
        notes: list[str] = []
        offered: set[bytes] = set()
        file_keys: list[tuple[str, paramiko.PKey]] = []
        file_blobs: set[bytes] = set()
        for path in t.identity_files:
            loaded = ctx.key_file(path)
            if isinstance(loaded, str):
                if loaded != "missing":
                    notes.append(loaded)
                pub = _public_blob_of_file(path)
                if pub is not None:
                    file_blobs.add(pub)
                continue
            file_keys.append((path, loaded))
            file_blobs.add(loaded.asbytes())
        agent: paramiko.Agent | None = None
        candidates: list[tuple[str, paramiko.PKey]] = []
        if ctx.use_agent and os.environ.get("SSH_AUTH_SOCK"):
            try:
                agent = paramiko.Agent()
                for ak in agent.get_keys():
                    if t.identities_only and ak.asbytes() not in file_blobs:
                        continue
                    candidates.append((f"agent key {ak.comment or fingerprint(ak.asbytes())}", ak))
            except (paramiko.SSHException, OSError) as exc:
                notes.append(f"ssh-agent unusable: {exc}")
        candidates += file_keys
        try:
            for label, key in candidates:
                blob = key.asbytes()
                if blob in offered:
                    continue
                offered.add(blob)
                tried.append(label)
                try:
                    self._remaining()
                    rest = transport.auth_publickey(t.user, key)
                except paramiko.BadAuthenticationType:
                    raise
                except paramiko.AuthenticationException:
                    continue
                if not rest and transport.is_authenticated():
                    return
                raise SSHError("auth", f"{t.user}@{t.hostname} wants more authentication ({', '.join(rest)})")
        finally:
            if agent is not None:
                agent.close()
        if not tried:
            extra = f" ({'; '.join(notes)})" if notes else ""
            raise SSHError("no-keys", f"no SSH key to log in to {t.user}@{t.hostname}: no agent key and no "
                           f"usable IdentityFile{extra}")
        names = ", ".join(tried[:3]) + (f" and {len(tried) - 3} more" if len(tried) > 3 else "")
        raise SSHError("auth", f"authentication refused for {t.user}@{t.hostname} (tried {names})")

    # -- run

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        """One exec: `/bin/sh -s` with the command on stdin (or `/bin/sh -c` when `input` is given)."""
        limit = timeout if timeout is not None else (self.timeout or DEFAULT_TIMEOUT)
        if self._transport is None:
            self._deadline = time.monotonic() + limit
        else:
            self._deadline = max(self._deadline, time.monotonic() + limit)
        transport = self.connect(self._deadline)
        try:
            return self._exec(transport, command, input)
        except SSHError:
            raise
        except Exception as exc:
            if self._aborted or time.monotonic() >= self._deadline:
                raise self._timeout_error() from exc
            raise self._map_error(exc) from exc

    def _exec(self, transport: paramiko.Transport, command: str, input: bytes | None) -> RunResult:
        self.phase = "opening the session"
        chan = transport.open_session(timeout=self._remaining())
        try:
            if input is None:
                remote, stdin = REMOTE_COMMAND, command.encode()
            else:
                remote, stdin = "/bin/sh -c " + shlex.quote(command), input
            self.phase = "exec"
            chan.settimeout(self._remaining())
            chan.exec_command(remote)
            self.execs += 1
            self.phase = "sending the script"
            chan.sendall(stdin)
            chan.shutdown_write()
            self.phase = "reading the output"
            out: list[bytes] = []
            err: list[bytes] = []
            size = 0
            while True:
                chan.settimeout(min(self._remaining(), 0.5))
                try:
                    data = chan.recv(65536)
                except TimeoutError:
                    while chan.recv_stderr_ready():
                        err.append(chan.recv_stderr(65536))
                    continue
                if not data:
                    break
                out.append(data)
                size += len(data)
                if size > MAX_OUTPUT:
                    raise SSHError("protocol", f"the command printed more than {MAX_OUTPUT >> 20} MiB")
            while chan.recv_stderr_ready():
                err.append(chan.recv_stderr(65536))
            self.phase = "waiting for the exit status"
            while not chan.status_event.wait(min(self._remaining(), 0.5)):
                pass
            # -1: the channel closed without an exit status (killed by a signal, or cut off)
            rc = chan.exit_status if chan.exit_status_ready() else -1
            return RunResult(rc, b"".join(out), b"".join(err))
        finally:
            chan.close()

    # -- close

    def _close_quietly(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            try:
                transport.close()
            except Exception:
                pass
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except Exception:
                pass
        jump, self._jump = self._jump, None
        while jump is not None:
            nxt = jump._via
            jump._close_quietly()
            jump = nxt

    def close(self) -> None:
        self._close_quietly()

    def __enter__(self) -> SSHHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

