"""`SSHHost`: one TCP connection, one SSH session, one exec per `run`."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any, TypeVar

import paramiko
from paramiko.common import DEFAULT_MAX_PACKET_SIZE, DEFAULT_WINDOW_SIZE
from paramiko.packet import Packetizer
from paramiko.ssh_exception import PartialAuthentication

from bsdcrypt.hostapi import REMOTE_COMMAND, RunResult, stdin_script
from bsdcrypt.hostspec import SpecError, quote_value, split_spec
from bsdcrypt.ssh.config import SSHContext, _public_blob_of_file, default_context
from bsdcrypt.ssh.direct import exec_once
from bsdcrypt.ssh.errors import SSHError, shown_bytes, shown_names
from bsdcrypt.ssh.kex import KexError, Unsupported
from bsdcrypt.ssh.knownhosts import KnownKey, _short_type, fingerprint
from bsdcrypt.ssh.oneshot import Loop, LoopTransport, supported
from bsdcrypt.ssh.packets import BannerError, PacketError, Packets
from bsdcrypt.ssh.proxy import ProxyCommandExited, ProxyCommandSocket
from bsdcrypt.ssh.transport import _CIPHERS, WireSocket, _DeadlinePacketizer, _host_key_algorithms, _Transport
from bsdcrypt.ssh.wireformat import Malformed, Truncated

# paramiko logs handshake failures with tracebacks; our callers get one-line errors instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

DEFAULT_TIMEOUT = 30.0
MAX_OUTPUT = 32 * 1024 * 1024
MAX_PROXY_JUMPS = 8
_T = TypeVar("_T", bound=paramiko.Transport)
_IDLE_POLL = 1.0  # seconds between paramiko's checks of a quiet TCP connection (its default: 0.1)


class SSHHost:
    """A host reached over SSH. Connects on the first `run`; `abort()` may be called from any thread."""

    kind = "ssh"
    can_exec = True

    def __init__(
        self,
        alias: str,
        *,
        user: str | None = None,
        port: int | None = None,
        context: SSHContext | None = None,
        spec: str | None = None,
        timeout: float | None = None,
        max_output: int = MAX_OUTPUT,
        single_run: bool = False,
    ) -> None:
        self.context = context or default_context()
        self.max_output = max_output  # stdout + stderr of one run, at most; more is an error (kind garbage)
        # one run, then closed (fleet-audit): the whole connection in the caller's thread (ssh/oneshot.py)
        self.single_run = single_run
        self.target = self.context.target(alias, user, port)
        self.name = alias
        self.spec = spec or alias
        self.timeout = timeout
        self.phase = "connect"
        self.connections = 0
        self.execs = 0
        self.key_exchanges = 0  # by bsdcrypt.ssh.direct (fleet-audit), the server's later ones included
        self.fallbacks = 0  # single runs that went to paramiko: the server had none of direct's algorithms
        self._transport: paramiko.Transport | None = None
        self._sock: Any = None
        self._jump: SSHHost | None = None
        self._aborted = False
        self._deadline = float("inf")
        self._depth = 0

    @classmethod
    def from_spec(
        cls,
        spec: str,
        context: SSHContext | None = None,
        timeout: float | None = None,
        max_output: int | None = None,
        single_run: bool = False,
    ) -> SSHHost:
        try:
            user, host, port = split_spec(spec)
        except SpecError as exc:
            raise SSHError("config", f"bad host {quote_value(spec)}: {exc}") from exc
        return cls(host, user=user, port=port, context=context, spec=spec, timeout=timeout,
                   max_output=MAX_OUTPUT if max_output is None else max_output, single_run=single_run)

    # -- deadline helpers

    def check_deadline(self) -> None:
        self.remaining()

    def remaining(self) -> float:
        left = self._deadline - time.monotonic()
        if self._aborted or left <= 0:
            raise self._timeout_error()
        return left

    def _timeout_error(self) -> SSHError:
        total = f" after {self.timeout:g}s" if self.timeout else ""
        if self.phase == "banner":
            t = self.target
            if self._proxy is not None:
                said = self._proxy.stderr_tail()
                said = f"; it printed: {said}" if said else ", and it printed nothing on stderr"
                return SSHError("timeout", f"timed out{total} waiting for the SSH banner through the ProxyCommand "
                                f"(still connecting to {t.hostname} port {t.port}?){said}")
            heard = getattr(self._packetizer, "heard", b"")
            said = f" (it sent {shown_bytes(heard)})" if heard else " (or sshd is overloaded)"
            return SSHError("no-ssh", f"timed out{total} waiting for the SSH banner: {t.hostname} port "
                            f"{t.port} accepts TCP but does not speak SSH{said}")
        return SSHError("timeout", f"timed out{total} during {self.phase}")

    def next_phase(self, phase: str) -> None:
        """Move on to `phase`, unless the deadline passed or the host was aborted during the current one:
        an abort shuts the socket down, so a read returns EOF, and the timeout must name the phase
        that was cut short, not the next one."""
        self.remaining()
        self.phase = phase

    def abort(self) -> None:
        """Unblock every wait of this host (watchdog); later calls fail as a timeout."""
        self._aborted = True
        sock = self._sock
        if sock is not None:
            try:
                if isinstance(sock, socket.socket):
                    sock.shutdown(socket.SHUT_RDWR)
                elif isinstance(sock, ProxyCommandSocket):
                    sock.abort()
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
            raise self._host_error(exc) from exc

    def _host_error(self, exc: BaseException) -> SSHError:
        """What a failure of paramiko or the socket means for this host: a timeout once it was aborted or
        its deadline passed (the phase cut short is named), else what the exception says."""
        if self._aborted or time.monotonic() >= self._deadline:
            return self._timeout_error()
        return self._map_error(exc)

    def _map_error(self, exc: BaseException) -> SSHError:
        t = self.target
        where = f"{t.hostname} port {t.port}"
        if isinstance(exc, socket.gaierror):
            return SSHError("resolve", f"cannot resolve {t.hostname}: {exc.strerror}")
        if isinstance(exc, ConnectionRefusedError):
            return SSHError("refused", f"connection refused by {where}")
        if isinstance(exc, BannerError) or (isinstance(exc, EOFError | TimeoutError) and self.phase == "banner"):
            # bsdcrypt.ssh.direct's banner: its own wait (ConnectTimeout) passed, or the peer closed
            return self._banner_error(isinstance(exc, TimeoutError))
        if isinstance(exc, TimeoutError | socket.timeout):
            # the host's own deadline is handled by connect(); this is a shorter limit: ConnectTimeout
            after = f" after {t.connect_timeout:g}s (ConnectTimeout)" if t.connect_timeout else ""
            return SSHError("timeout", f"timed out{after} during {self.phase} ({where})")
        if isinstance(exc, paramiko.BadAuthenticationType):
            allowed = shown_names(exc.allowed_types) or "none"
            return SSHError("auth", f"{t.user}@{where} does not accept public keys (allows: {allowed})")
        if isinstance(exc, paramiko.AuthenticationException):
            return SSHError("auth", f"authentication failed for {t.user}@{t.hostname}: {exc}")
        if isinstance(exc, ProxyCommandExited):
            when = "before the SSH banner" if self.phase in ("connect", "banner") else f"during {self.phase}"
            return SSHError("proxy", exc.describe(when))
        if isinstance(exc, paramiko.ProxyCommandFailure):
            return SSHError("proxy", f"ProxyCommand failed: {exc}")
        if isinstance(exc, PacketError | KexError | Truncated | Malformed):
            what = f"a message ended early (reading {exc})" if isinstance(exc, Truncated) else str(exc)
            return SSHError("protocol", f"SSH error during {self.phase} with {where}: {what}")
        if isinstance(exc, paramiko.SSHException):
            text = str(exc)
            heard = getattr(self._packetizer, "heard", b"")
            if heard and ("protocol banner" in text or "Indecipherable protocol version" in text):
                return self._banner_error(False)
            if "protocol banner" in text:
                timed_out = self.phase == "banner" and time.monotonic() >= self._banner_deadline - 0.05
                return self._banner_error(timed_out)
            if "Indecipherable protocol version" in text or "Invalid SSH banner" in text:
                return SSHError("no-ssh", f"{where} does not speak SSH ({shown_bytes(text.encode())})")
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

    def _banner_error(self, timed_out: bool) -> SSHError:
        """No SSH banner: what the peer sent (if anything) tells a service that is not sshd from a peer that
        closed at once or said nothing in time."""
        t = self.target
        where = f"{t.hostname} port {t.port}"
        heard = getattr(self._packetizer, "heard", b"")
        if heard:
            # paramiko says "Error reading SSH protocol banner" for EOF, for its per-line wait and for
            # undecodable bytes alike: what the peer sent tells them apart (an SMTP greeting, an HTTP
            # error, binary noise: something that is not sshd answers there)
            size = getattr(self._packetizer, "heard_size", len(heard))
            via = " through the ProxyCommand" if self._proxy is not None else ""
            return SSHError("no-ssh", f"{where} does not speak SSH: it sent{via} {shown_bytes(heard)} "
                            f"({size} byte{'' if size == 1 else 's'}, no SSH banner)")
        if self._proxy is not None:  # no TCP of ours: say what the ProxyCommand did
            said = self._proxy.stderr_tail()
            said = f"; it printed: {said}" if said else ", and it printed nothing on stderr"
            cmd = self._proxy.command
            cmd = cmd if len(cmd) <= 80 else cmd[:79] + "…"
            if timed_out:
                ct = " (ConnectTimeout)" if self._banner_wait == t.connect_timeout else ""
                return SSHError("timeout", f"timed out after {self._banner_wait:g}s{ct} waiting for the "
                                f"SSH banner through the ProxyCommand (still connecting to {where}?)"
                                f"{said} (command: {cmd})")
            return SSHError("proxy", f"the ProxyCommand's connection to {where} ended before the SSH "
                            f"banner{said} (command: {cmd})")
        if timed_out:
            return SSHError("no-ssh", f"{where} accepted TCP but sent no SSH banner "
                            f"within {self._banner_wait:g}s (not an SSH server?)")
        return SSHError("closed", f"{where} closed the connection before the SSH banner")

    def _open_socket(self) -> Any:
        t = self.target
        if self._via is not None:  # a later hop of a ProxyJump chain
            via = self._via._transport
            assert via is not None
            return via.open_channel(
                "direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0), timeout=self.remaining()
            )
        if t.proxy_jump:
            if self._depth >= MAX_PROXY_JUMPS:
                raise SSHError("proxy", f"ProxyJump chain longer than {MAX_PROXY_JUMPS} hops (a loop?)")
            hops = [h.strip() for h in t.proxy_jump.split(",") if h.strip()]
            prev: SSHHost | None = None
            for hop in hops:
                try:
                    user, host, port = split_spec(hop.removeprefix("ssh://"))
                except SpecError as exc:  # `ProxyJump gw:abc`: the config's fault, as ssh says
                    raise SSHError("config", f"bad ProxyJump {hop[:80]!r} for {t.alias}: {exc}") from exc
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
                "direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0), timeout=self.remaining()
            )
        if t.proxy_command:  # tokens (%h %p %r %n %%) were expanded by SSHContext.target
            try:
                self._proxy = ProxyCommandSocket(t.proxy_command)
                return self._proxy
            except OSError as exc:
                raise SSHError("proxy", f"cannot start ProxyCommand {t.proxy_command!r}: {exc.strerror}") from exc
        self.phase = "name resolution"
        infos = socket.getaddrinfo(t.hostname, t.port, type=socket.SOCK_STREAM)
        self.phase = "connect"
        last: BaseException | None = None
        for family, socktype, proto, _, addr in infos:
            sock = socket.socket(family, socktype, proto)
            self._sock = sock
            limit = self.remaining()
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
    _proxy: ProxyCommandSocket | None = None
    _banner_deadline = 0.0
    _banner_wait = 0.0
    _packetizer: Any = None  # the transport's, kept after a failed connect closed it: what the peer sent

    def _connect(self) -> paramiko.Transport:
        transport, known = self._new_transport(_Transport)
        event = threading.Event()
        transport.start_client(event=event)
        done = event.wait(self.remaining())
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

    def _connection(self) -> tuple[Any, list[KnownKey]]:
        """The TCP connection (or proxy), counted; the host's known_hosts entries."""
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
        return sock, ctx.known_hosts.lookup(t.known_hosts_name)

    def _banner_wait_starts(self) -> float:
        """From now the banner has until ConnectTimeout (or the host's deadline); returns what is left of
        the deadline."""
        t = self.target
        remaining = self.remaining()
        self._banner_wait = min(remaining, t.connect_timeout) if t.connect_timeout else remaining
        self._banner_deadline = time.monotonic() + self._banner_wait
        return remaining

    def _new_transport(self, cls: type[_T]) -> tuple[_T, list[KnownKey]]:
        """The TCP connection (or proxy) and a transport of `cls` on it, not started; the host's known keys."""
        sock, known = self._connection()
        wire: Any = WireSocket(sock) if isinstance(sock, socket.socket) else sock
        transport = cls(wire)
        if isinstance(wire, WireSocket):
            # paramiko's thread wakes every 0.1 s to poll for a close: ~10 GIL round trips per second per
            # host in flight, for nothing (deadlines are the worker's; abort and close shut the socket
            # down, which ends the wait at once). Measured: -9% client CPU per host at 500 hosts.
            sock.settimeout(_IDLE_POLL)
        if type(transport.packetizer) is Packetizer:
            transport.packetizer.__class__ = _DeadlinePacketizer
        self._packetizer = transport.packetizer
        self._transport = transport
        security = transport.get_security_options()
        security.key_types = _host_key_algorithms([k for k in known if not k.revoked])
        security.ciphers = _CIPHERS
        remaining = self._banner_wait_starts()
        transport.banner_timeout = self._banner_wait
        transport.handshake_timeout = remaining
        transport.auth_timeout = remaining
        self.phase = "banner"
        return transport, known

    def _check_host_key(self, transport: paramiko.Transport, known: list[KnownKey]) -> None:
        key = transport.get_remote_server_key()
        self.check_host_key(key.get_name(), key.asbytes(), known)

    def check_host_key(self, key_type: str, blob: bytes, known: list[KnownKey] | None = None) -> None:
        """The server's host key against known_hosts (`known`: this host's entries, looked up if None)."""
        t = self.target
        if known is None:
            known = self.context.known_hosts.lookup(t.known_hosts_name)
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
            import shlex

            # What makes ssh itself apply the same config (HostKeyAlias, ProxyJump, ProxyCommand...): the
            # alias as written, the same -F, and -p/user@ only where the host line had them.
            try:
                user, alias, port = split_spec(self.spec.removeprefix("ssh://"))
            except SpecError:
                user, alias, port = None, self.name, None
            words = ["ssh"]
            if self.context.config_path:
                words += ["-F", os.path.abspath(os.path.expanduser(self.context.config_path))]
            if port is not None:
                words += ["-p", str(port)]
            words.append(f"{user}@{alias}" if user else alias)
            files = ", ".join(t.user_known_hosts[:1]) or "known_hosts"
            raise SSHError(
                "hostkey-unknown",
                f"host key of {name} is not in {files} ({fp}); verify it, then add it: "
                f"`{shlex.join(words)}` once, or rerun fleet-audit with --accept-new",
            )
        if not t.user_known_hosts:
            raise SSHError("config", "--accept-new needs a UserKnownHostsFile to write to")
        self.context.known_hosts.add(t.user_known_hosts[0], name, key_type, blob, t.hash_known_hosts)

    def _authenticate(self, transport: paramiko.Transport) -> None:
        t = self.target
        candidates, notes, agent = self.key_candidates()
        tried: list[str] = []
        try:
            for label, key in candidates:
                tried.append(label)
                try:
                    self.remaining()
                    rest = transport.auth_publickey(t.user, key)
                except paramiko.BadAuthenticationType:
                    raise
                except paramiko.AuthenticationException:
                    continue
                if not rest and transport.is_authenticated():
                    return
                raise self.more_auth(rest)
        finally:
            if agent is not None:
                agent.close()
        raise self.auth_refused(tried, notes)

    def key_candidates(self) -> tuple[list[tuple[str, paramiko.PKey]], list[str], paramiko.Agent | None]:
        """The keys to offer, in ssh's order, each once (label, key); notes on keys that could not be
        used; the agent connection to close afterwards (None if not asked)."""
        t = self.target
        ctx = self.context
        notes: list[str] = []
        # (label, key, its public blob): each blob made once (paramiko builds it anew on every asbytes())
        file_keys: list[tuple[str, paramiko.PKey, bytes]] = []
        file_blobs: set[bytes] = set()
        unloaded = False  # an IdentityFile whose private key cannot be read here (the agent may hold it)
        for path in t.identity_files:
            loaded = ctx.key_file(path)
            if isinstance(loaded, str):
                if loaded != "missing":
                    notes.append(loaded)
                pub = _public_blob_of_file(path)
                if pub is not None:
                    file_blobs.add(pub)
                    unloaded = True
                continue
            blob = loaded.asbytes()
            file_keys.append((path, loaded, blob))
            file_blobs.add(blob)
        local = {blob: (path, key, blob) for path, key, blob in file_keys}
        agent: paramiko.Agent | None = None
        candidates: list[tuple[str, paramiko.PKey, bytes]] = []
        # The agent is asked only when it can add a key: with IdentitiesOnly and every IdentityFile loaded
        # here, it holds nothing that may be offered. A key held both by the agent and in a loadable
        # IdentityFile is signed here, in ssh's order, without a round trip to the agent (~1 ms a host).
        agent_useful = not t.identities_only or unloaded
        if ctx.use_agent and agent_useful and os.environ.get("SSH_AUTH_SOCK"):
            try:
                agent = paramiko.Agent()
                for ak in agent.get_keys():
                    blob = ak.asbytes()
                    if t.identities_only and blob not in file_blobs:
                        continue
                    if blob in local:
                        candidates.append(local[blob])
                        continue
                    candidates.append((f"agent key {ak.comment or fingerprint(blob)}", ak, blob))
            except (paramiko.SSHException, OSError) as exc:
                notes.append(f"ssh-agent unusable: {exc}")
        candidates += file_keys
        offered: set[bytes] = set()
        unique: list[tuple[str, paramiko.PKey]] = []
        for label, key, blob in candidates:
            if blob not in offered:
                offered.add(blob)
                unique.append((label, key))
        return unique, notes, agent

    def more_auth(self, rest: list[str]) -> SSHError:
        t = self.target
        return SSHError("auth", f"{t.user}@{t.hostname} wants more authentication ({shown_names(rest)})")

    def auth_refused(self, tried: list[str], notes: list[str]) -> SSHError:
        t = self.target
        if not tried:
            extra = f" ({'; '.join(notes)})" if notes else ""
            return SSHError("no-keys", f"no SSH key to log in to {t.user}@{t.hostname}: no agent key and no "
                            f"usable IdentityFile{extra}")
        names = ", ".join(tried[:3]) + (f" and {len(tried) - 3} more" if len(tried) > 3 else "")
        return SSHError("auth", f"authentication refused for {t.user}@{t.hostname} (tried {names})")

    # -- run

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        """One exec: `/bin/sh -s` with the command (and any `input`, see host.stdin_script) on stdin."""
        limit = timeout if timeout is not None else (self.timeout or DEFAULT_TIMEOUT)
        if self._transport is None:
            self._deadline = time.monotonic() + limit
        else:
            self._deadline = max(self._deadline, time.monotonic() + limit)
        if self.single_run and self._transport is None and supported():
            return self._run_once(command, input)
        transport = self.connect(self._deadline)
        try:
            return self._exec(transport, command, input)
        except SSHError:
            raise
        except Exception as exc:
            raise self._host_error(exc) from exc

    def _window(self) -> int:
        """The session channel's window, which bounds what paramiko buffers unread for us: half the output
        allowed (fleet-audit: 512 KiB, so a real probe, <= 51 KB, still needs no window adjustment: paramiko
        sends one per tenth of the window read), paramiko's 2 MiB for the commands allowed 32 MiB."""
        return min(DEFAULT_WINDOW_SIZE, max(self.max_output // 2, DEFAULT_MAX_PACKET_SIZE))

    def _exec(self, transport: paramiko.Transport, command: str, input: bytes | None) -> RunResult:
        self.next_phase("opening the session")
        chan = transport.open_session(window_size=self._window(), timeout=self.remaining())
        try:
            # Always the one line every login shell parses alike (csh/tcsh too): see host.REMOTE_COMMAND.
            remote, stdin = REMOTE_COMMAND, stdin_script(command, input)
            self.next_phase("exec")
            chan.settimeout(self.remaining())
            _exec_without_waiting(transport, chan, remote)
            self.execs += 1
            self.next_phase("sending the script")
            chan.sendall(stdin)
            chan.shutdown_write()
            self.next_phase("reading the output")
            out: list[bytes] = []
            err: list[bytes] = []
            size = 0
            while True:
                chan.settimeout(min(self.remaining(), 0.5))
                try:
                    data = chan.recv(65536)
                except TimeoutError:
                    size += self._read_stderr(chan, err, size)
                    continue
                if not data:
                    break
                out.append(data)
                size += len(data)
                if size > self.max_output:
                    raise self.too_much()
            self._read_stderr(chan, err, size)
            self.next_phase("waiting for the exit status")
            while not chan.status_event.wait(min(self.remaining(), 0.5)):
                pass
            return self._result(chan, remote, out, err)
        finally:
            chan.close()

    def _result(self, chan: paramiko.Channel, remote: str, out: list[bytes], err: list[bytes]) -> RunResult:
        if not chan.event_ready and not out and not chan.exit_status_ready():
            raise SSHError("protocol", f"{self.target.hostname} refused to run {remote!r} (exec request denied)")
        # -1: the channel closed without an exit status (killed by a signal, or cut off)
        rc = chan.exit_status if chan.exit_status_ready() else -1
        return RunResult(rc, b"".join(out), b"".join(err))

    def _run_once(self, command: str, input: bytes | None) -> RunResult:
        """The connection, the exec and the close, all in this thread: bsdcrypt's own client over TCP
        (bsdcrypt.ssh.direct), paramiko's loop (bsdcrypt.ssh.oneshot) through a proxy or with a server
        that has none of the direct client's algorithms."""
        t = self.target
        try:
            if not (t.proxy_command or t.proxy_jump or self._via is not None):
                try:
                    return self._direct_exec(command, input)
                except Unsupported:
                    self._close_quietly()
                    self.fallbacks += 1
            return self._loop_exec(command, input)
        except SSHError:
            raise
        except Exception as exc:
            raise self._host_error(exc) from exc
        finally:
            self._close_quietly()

    def _direct_exec(self, command: str, input: bytes | None) -> RunResult:
        sock, known = self._connection()
        sock.settimeout(_IDLE_POLL)  # a poll interval: Packets checks the deadline at each wait
        packets = Packets(sock, self._deadline)
        self._packetizer = packets  # what the peer said before its banner, for the errors
        self._banner_wait_starts()
        session = exec_once(
            self, packets, _host_key_algorithms([k for k in known if not k.revoked]), self._banner_deadline,
            REMOTE_COMMAND, stdin_script(command, input), self._window(),
        )
        self.key_exchanges += session.key_exchanges
        return RunResult(session.rc, b"".join(session.out), b"".join(session.err))

    def _loop_exec(self, command: str, input: bytes | None) -> RunResult:
        """What connect() and _exec() do, as steps of paramiko's message loop run here: each step runs
        when the one before it is answered (keys exchanged -> log in -> session open -> exec, script,
        output), the script is sent as the server's window allows, the output read as it arrives."""
        transport, known = self._new_transport(LoopTransport)
        wire = transport.sock if isinstance(transport.sock, WireSocket) else None
        if wire is not None:
            wire.quick = False  # every server message until the output is answered at once (see WireSocket)
        loop = Loop(transport, self._deadline)
        t = self.target
        remote, stdin = REMOTE_COMMAND, stdin_script(command, input)
        out: list[bytes] = []
        err: list[bytes] = []
        size = 0
        sent = 0  # bytes of stdin sent
        sending = True
        tried: list[str] = []
        keys: list[tuple[str, paramiko.PKey]] = []
        notes: list[str] = []
        agent: paramiko.Agent | None = None
        chan: paramiko.Channel | None = None

        def keys_exchanged() -> None:
            nonlocal keys, notes, agent
            self.phase = "host key check"
            self._check_host_key(transport, known)
            self.phase = "authentication"
            keys, notes, agent = self.key_candidates()
            next_key()

        def next_key() -> None:
            if not keys:
                raise self.auth_refused(tried, notes)
            label, key = keys.pop(0)
            tried.append(label)
            self.remaining()
            transport.auth_publickey(t.user, key, event=loop.later(answered))

        def answered() -> None:
            nonlocal chan
            if not transport.is_authenticated():
                exc = transport.get_exception()
                if isinstance(exc, PartialAuthentication):
                    raise self.more_auth(exc.allowed_types)
                if isinstance(exc, paramiko.BadAuthenticationType):
                    raise exc
                next_key()  # refused: the next key, as auth_publickey's AuthenticationException
                return
            self.next_phase("opening the session")
            chan = loop.open_session(self._window(), DEFAULT_MAX_PACKET_SIZE, opened)

        def opened() -> None:
            assert chan is not None
            if not chan.active:  # the server refused the channel (paramiko saved why)
                raise transport.get_exception() or paramiko.SSHException("Unable to open channel.")
            self.next_phase("exec")
            _exec_without_waiting(transport, chan, remote)
            self.execs += 1
            self.next_phase("sending the script")
            loop.watch = progress

        def progress() -> bool:
            nonlocal sending, sent, size
            assert chan is not None
            if sending:
                if chan.closed or chan.eof_sent:
                    sending = False  # refused or gone: what it said is read below
                    if wire is not None:
                        wire.quick = True
                else:  # all the server's window takes now (paramiko's send would wait for more; this never does)
                    while sent < len(stdin) and chan.out_window_size > 0:
                        sent += chan.send(stdin[sent:sent + 65536])  # a packet at most: no copy of the rest
                    if sent == len(stdin):
                        sending = False
                        chan.shutdown_write()
                        if wire is not None:
                            wire.quick = True  # from here on the client only reads
                        self.next_phase("reading the output")
            while chan.recv_ready():
                data = chan.recv(65536)
                out.append(data)
                size += len(data)
                if size > self.max_output:
                    raise self.too_much()
            size += self._read_stderr(chan, err, size)
            return bool(chan.eof_received or chan.closed) and (chan.exit_status_ready() or chan.closed)

        transport.start_client(event=loop.later(keys_exchanged))
        try:
            transport.run()
        finally:
            if agent is not None:
                agent.close()
        if self.phase == "banner" and transport.remote_version:
            self.phase = "key exchange"
        if loop.error is not None:
            raise loop.error
        if not loop.finished or chan is None:
            exc = transport.get_exception()
            if exc is not None:
                raise exc
            # paramiko left its loop without an error: the server's disconnect message, or a message for a
            # channel never opened
            raise SSHError("closed", f"{t.hostname} port {t.port} ended the SSH session during {self.phase}")
        return self._result(chan, remote, out, err)

    def _read_stderr(self, chan: paramiko.Channel, err: list[bytes], size: int) -> int:
        """What stderr holds now, counted with stdout against max_output; returns how many bytes."""
        got = 0
        while chan.recv_stderr_ready():
            data = chan.recv_stderr(65536)
            err.append(data)
            got += len(data)
            if size + got > self.max_output:
                raise self.too_much()
        return got

    def too_much(self) -> SSHError:
        limit = self.max_output
        shown = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
        return SSHError("garbage", f"the host printed more than {shown} (stdout and stderr together), more than "
                        "this command can print: the rest was not read")

    # -- close

    def _close_quietly(self) -> None:
        transport, self._transport = self._transport, None
        if isinstance(self._sock, socket.socket):  # wakes paramiko's thread from its read (see _IDLE_POLL)
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
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
        proxy = self._proxy  # kept: errors quote its stderr after the close; closing it again is a no-op
        if proxy is not None and proxy is not sock:  # e.g. interrupted before _connect kept it as the socket
            try:
                proxy.close()  # kills the ProxyCommand's process group
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


def _exec_without_waiting(transport: paramiko.Transport, chan: paramiko.Channel, command: str) -> None:
    """`chan.exec_command(command)` without waiting for the server's reply before the script follows.

    ssh(1) does the same (`ssh host sh -s < script` sends the exec request, the data and EOF at once):
    sshd handles a channel's messages in order, so the command runs before the data reaches it. A
    refusal closes the channel (paramiko's _request_failed), which `_exec` reports once the output ends;
    a success sets `chan.event_ready`. One wait for a round trip, and its thread handoff, less per host.
    """
    m = paramiko.Message()
    m.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
    m.add_int(chan.remote_chanid)
    m.add_string("exec")
    m.add_boolean(True)
    m.add_string(command)
    chan._event_pending()  # type: ignore[attr-defined]  # noqa: SLF001 - the reply's handler sets what exec_command would wait for
    transport._send_user_message(m)  # type: ignore[attr-defined]  # noqa: SLF001
