"""`SSHHost`: a host reached with paramiko's public API (Transport, auth_publickey, open_session,
exec_command, open_channel for ProxyJump): one connection, one exec per `run`.

Deadlines: the whole run has `timeout`; the TCP connect and the SSH banner have ConnectTimeout (the
config's, else DEFAULT_CONNECT_TIMEOUT) within it, like ssh's. `abort()` from another thread ends every
wait at once (the socket is shut down, a ProxyCommand's process group killed, an `ssh -G` killed).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import paramiko
from paramiko.common import DEFAULT_MAX_PACKET_SIZE, DEFAULT_WINDOW_SIZE

from bsdcrypt.hostapi import REMOTE_COMMAND, RunResult, stdin_script
from bsdcrypt.hostspec import SSHSpec
from bsdcrypt.ssh.auth import Attempt, auth_refused, authenticate
from bsdcrypt.ssh.errors import OPENSSH_HINT, SSHError, shown_bytes, shown_names, ssh_spec
from bsdcrypt.ssh.hostkeys import KnownKey, fingerprint, short_type
from bsdcrypt.ssh.limits import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, MAX_OUTPUT, SLOW_NOTE_AFTER
from bsdcrypt.ssh.settings import Lookup, SSHContext, Target, choose, default_context, parse_hop
from bsdcrypt.ssh.sockets import BudgetSocket, ProxyCommand, connect_tcp

# paramiko logs handshake failures with tracebacks; our callers get one-line errors instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

MAX_PROXY_JUMPS = 8


def byte_budget(max_output: int) -> int:
    """What a host may send over the whole connection: the output allowed, SSH's framing of it, and room
    for the handshake (a few KiB in practice)."""
    return max_output + max_output // 4 + (256 << 10)


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
        on_slow: Callable[[str], None] | None = None,
        depth: int = 0,
    ) -> None:
        self.context = context or default_context()
        self.alias, self.user, self.port = alias, user, port
        self.name = alias
        self.spec = spec or alias
        self.timeout = timeout
        self.max_output = max_output  # stdout + stderr of one run, at most; more is an error (kind garbage)
        self.on_slow = on_slow
        self.phase = "connect"
        self.connections = 0
        self.execs = 0
        self._target: Target | None = None
        self._transport: paramiko.Transport | None = None
        self._sock: BudgetSocket | None = None
        self._proxy: ProxyCommand | None = None
        self._jump: SSHHost | None = None
        self._lookup = Lookup()
        self._aborted = False
        self._deadline = float("inf")
        self.depth = depth  # how many ProxyJump hops stand before this host

    @classmethod
    def from_spec(cls, spec: str | SSHSpec, context: SSHContext | None = None, timeout: float | None = None,
                  max_output: int | None = None, on_slow: Callable[[str], None] | None = None) -> SSHHost:
        """A host from its spec: an SSHSpec parsed once upstream (a hosts file), or `--host` text, parsed here."""
        spec = ssh_spec(spec)
        user, host, port = spec.user, spec.host, spec.port
        return cls(host, user=user, port=port, context=context, spec=spec.text, timeout=timeout,
                   max_output=MAX_OUTPUT if max_output is None else max_output, on_slow=on_slow)

    # -- the config

    def resolve(self, deadline: float | None = None) -> Target:
        """The ssh config applied to this host (`ssh -G`, under the deadline; abort() kills it)."""
        if self._target is None:
            if deadline is None:
                deadline = self._deadline if self._deadline != float("inf") else \
                    time.monotonic() + (self.timeout or DEFAULT_TIMEOUT)
            self.phase = "reading the ssh config (ssh -G: a slow Match exec?)" if self.context.ssh else \
                "reading the ssh config"
            try:
                self._target = self.context.target(self.alias, self.user, self.port, deadline, self._lookup)
            except SSHError as exc:
                if self._aborted or exc.kind == "timeout":
                    raise self._timeout_error() from None
                raise
        return self._target

    def pin(self, target: Target) -> None:
        """Use `target` as this host's settings (a ProxyJump hop whose own hops the chain gives)."""
        self._target = target

    def heard_banner(self) -> bool:
        """Whether the host sent its SSH banner (paramiko's public `remote_version`)."""
        return bool(self._transport is not None and self._transport.remote_version)

    @property
    def proxy(self) -> ProxyCommand | None:
        """The ProxyCommand of the connection, if it runs through one."""
        return self._proxy

    @property
    def target(self) -> Target:
        return self.resolve()

    # -- deadlines

    def remaining(self) -> float:
        left = self._deadline - time.monotonic()
        if self._aborted or left <= 0:
            raise self._timeout_error()
        return left

    def _timeout_error(self) -> SSHError:
        total = f" after {self.timeout:g}s" if self.timeout else ""
        if self.phase == "banner" and not self.heard_banner():
            t = self._target
            where = f"{t.hostname} port {t.port}" if t else self.alias
            if self._proxy is not None:
                said = self._proxy.stderr_tail()
                said = f"; it printed: {said}" if said else ", and it printed nothing on stderr"
                return SSHError("timeout", f"timed out{total} waiting for the SSH banner through the ProxyCommand "
                                f"(still connecting to {where}?){said}")
            sock = self._sock
            heard = f" (it sent {shown_bytes(sock.heard)})" if sock is not None and sock.heard else ""
            return SSHError("no-ssh", f"timed out{total} waiting for the SSH banner: {where} accepts TCP but "
                            f"does not speak SSH{heard or ' (or sshd is overloaded)'}")
        return SSHError("timeout", f"timed out{total} during {self.phase}")

    def abort(self) -> None:
        """Unblock every wait of this host (a watchdog, Ctrl-C); later calls fail as a timeout."""
        self._aborted = True
        self._lookup.kill()
        if self._proxy is not None:
            self._proxy.kill()
        if self._sock is not None:
            self._sock.stop()
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
            error = self._host_error(exc)
            self._close_quietly()
            raise error from exc

    def _connect(self) -> paramiko.Transport:
        t = self.resolve(self._deadline)
        if t.unsupported:
            raise SSHError("unsupported", f"the ssh config for {t.alias} sets {t.unsupported[0]}, which the "
                           f"paramiko path cannot honour: {OPENSSH_HINT}")
        known = self._known_keys(t)
        tried: list[str] = []
        notes: list[str] = []
        refused: set[bytes] = set()  # agent keys that refused to sign: not offered again
        for _ in range(8):
            transport = self._handshake(t, known)
            if self._authenticate(transport, t, tried, notes, refused):
                return transport
            self._close_quietly(keep_proxy_note=False)  # an agent key refused to sign: a new connection
        raise self.auth_refused(t, tried, notes)

    def _known_keys(self, t: Target) -> list[KnownKey]:
        ctx = self.context
        self.phase = "reading known_hosts"
        for path in t.user_known_hosts + t.global_known_hosts:
            ctx.known_hosts.load(path)
        known = ctx.known_hosts.lookup(t.known_hosts_name)
        if any(k.authority for k in known) and not any(not k.revoked and not k.authority for k in known):
            where = next(k.where for k in known if k.authority)
            raise SSHError("unsupported", f"known_hosts trusts a host CA for {t.known_hosts_name} "
                           f"(@cert-authority, {where}); the paramiko path cannot check host certificates: "
                           f"{OPENSSH_HINT}")
        return known

    def _open_socket(self, t: Target) -> Any:
        """The byte stream to the host's sshd: through a ProxyJump chain, a ProxyCommand, or TCP."""
        budget = byte_budget(self.max_output)
        if t.proxy_jump:
            return self._through_jumps(t)
        if t.proxy_command:
            self.phase = "starting the ProxyCommand"
            try:
                self._proxy = ProxyCommand(t.proxy_command, budget)
            except OSError as exc:
                raise SSHError("proxy", f"cannot start ProxyCommand {t.proxy_command[:80]!r}: "
                               f"{exc.strerror or exc}") from exc
            self._sock = self._proxy.sock
            return self._sock
        self.phase = "connect"
        sock = connect_tcp(t.hostname, t.port, self._connect_wait(t))
        self._sock = BudgetSocket.wrap(sock, budget)
        if self._aborted:
            raise self._timeout_error()
        return self._sock

    def _connect_wait(self, t: Target) -> float:
        return min(self.remaining(), t.connect_timeout or DEFAULT_CONNECT_TIMEOUT)

    def _through_jumps(self, t: Target) -> paramiko.Channel:
        if self.depth >= MAX_PROXY_JUMPS:
            raise SSHError("proxy", f"ProxyJump chain longer than {MAX_PROXY_JUMPS} hops (a loop?)")
        assert t.proxy_jump
        hops = [h.strip() for h in t.proxy_jump.split(",") if h.strip()]
        hop = hops[-1]  # the last hop connects to us; the ones before it are its own ProxyJump
        user, name, port = parse_hop(hop)
        jump = SSHHost(name, user=user, port=port, context=self.context, spec=hop, timeout=self.timeout,
                       max_output=self.max_output, depth=self.depth + 1)
        if len(hops) > 1:  # the hops before it are its own ProxyJump, whatever its config says (as ssh -J)
            jump.pin(_with_jump(jump.resolve(self._deadline), ",".join(hops[:-1])))
        self._jump = jump
        self.phase = f"ProxyJump via {hop}"
        try:
            via = jump.connect(self._deadline)
        except SSHError as exc:
            raise SSHError(exc.kind, f"ProxyJump {hop}: {exc}") from exc
        self.phase = "connect"
        try:
            return via.open_channel("direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0),
                                    timeout=min(self.remaining(), self._connect_wait(t)))
        except paramiko.ChannelException as exc:
            raise SSHError("proxy", f"ProxyJump {hop} could not reach {t.hostname} port {t.port}: "
                           f"{shown_bytes(str(exc.text).encode())}") from exc

    def _handshake(self, t: Target, known: list[KnownKey]) -> paramiko.Transport:
        sock = self._open_socket(t)
        self.connections += 1
        transport = paramiko.Transport(sock)
        self._transport = transport
        self._configure(transport, t, known)
        wait = self._connect_wait(t)
        transport.banner_timeout = wait + 1.0  # our own wait below ends first, with a clearer line
        transport.handshake_timeout = self.remaining()
        transport.auth_timeout = self.remaining()
        event = threading.Event()
        self.phase = "banner"
        timer = None
        if self.on_slow is not None:
            note = f"still waiting for {t.hostname} port {t.port} to answer with an SSH banner…"
            timer = threading.Timer(min(SLOW_NOTE_AFTER, wait / 2), self.on_slow, (note,))
            timer.daemon = True
            timer.start()
        try:
            transport.start_client(event=event)
            if not event.wait(wait) and not transport.remote_version:
                raise self._no_banner(t, wait)
            if transport.remote_version:
                self.phase = "key exchange"
            if not event.wait(self.remaining()):
                raise self._timeout_error()
        finally:
            if timer is not None:
                timer.cancel()
        if not transport.is_active():
            exc = transport.get_exception()
            raise exc if exc is not None else SSHError("closed", "SSH negotiation failed")
        self.phase = "host key check"
        key = transport.get_remote_server_key()
        self.check_host_key(key.get_name(), key.asbytes(), known)
        return transport

    def _no_banner(self, t: Target, wait: float) -> SSHError:
        where = f"{t.hostname} port {t.port}"
        ct = " (ConnectTimeout)" if t.connect_timeout else ""
        if self._proxy is not None:
            said = self._proxy.stderr_tail()
            said = f"; it printed: {said}" if said else ", and it printed nothing on stderr"
            return SSHError("timeout", f"timed out after {wait:.3g}s{ct} waiting for the SSH banner through the "
                            f"ProxyCommand (still connecting to {where}?){said}")
        sock = self._sock
        if sock is not None and sock.heard:
            return SSHError("no-ssh", f"{where} does not speak SSH: it sent {shown_bytes(sock.heard)} "
                            f"({sock.received} bytes, no SSH banner within {wait:.3g}s)")
        return SSHError("no-ssh", f"{where} accepted TCP but sent no SSH banner within {wait:.3g}s{ct} "
                        "(not an SSH server, or sshd is overloaded)")

    def _configure(self, transport: paramiko.Transport, t: Target, known: list[KnownKey]) -> None:
        """The config's algorithm lists on paramiko's public SecurityOptions; host key types known for the
        host first (as ssh orders them). None of paramiko's algorithms allowed: refused, naming openssh."""
        security = transport.get_security_options()
        lists = {"KexAlgorithms": ("kex", t.kex), "Ciphers": ("ciphers", t.ciphers),
                 "MACs": ("digests", t.macs), "HostKeyAlgorithms": ("key_types", t.host_key_algorithms)}
        for keyword, (attr, wanted) in lists.items():
            have: tuple[str, ...] = getattr(security, attr)
            chosen = choose(wanted, have)
            if not chosen:
                raise SSHError("unsupported", f"the ssh config's {keyword} for {t.alias} allows none of "
                               f"paramiko's ({shown_names(list(have))}): {OPENSSH_HINT}")
            if attr == "key_types":
                types = {k.key_type for k in known if not k.revoked and not k.authority}
                if "ssh-rsa" in types:
                    types |= {"rsa-sha2-256", "rsa-sha2-512"}
                chosen = [k for k in chosen if k in types] + [k for k in chosen if k not in types]
            if tuple(chosen) != have:
                setattr(security, attr, chosen)
        if t.pubkey_algorithms is not None:
            have = tuple(transport.preferred_pubkeys)
            allowed = choose(t.pubkey_algorithms, have)
            transport.disabled_algorithms = {"pubkeys": [a for a in have if a not in allowed]}

    def check_host_key(self, key_type: str, blob: bytes, known: list[KnownKey] | None = None) -> None:
        """The server's host key against known_hosts (`known`: this host's entries)."""
        t = self.target
        if known is None:
            known = self.context.known_hosts.lookup(t.known_hosts_name)
        name = t.known_hosts_name
        fp = f"{short_type(key_type)} {fingerprint(blob)}"
        revoked = [k for k in known if k.revoked and k.blob == blob]
        if revoked:
            raise SSHError("hostkey-revoked", f"host key of {name} is marked @revoked ({revoked[0].where}): {fp}")
        good = [k for k in known if not k.revoked and not k.authority]
        if any(k.blob == blob for k in good):
            return
        authority = [k for k in known if k.authority]
        if authority:  # a plain key did not match, a CA might: only ssh can tell
            raise SSHError("unsupported", f"the host key of {name} ({fp}) is not in known_hosts, which trusts a "
                           f"host CA for it ({authority[0].where}): {OPENSSH_HINT}")
        if good:
            other = good[0]
            raise SSHError(
                "hostkey-changed",
                f"HOST KEY CHANGED for {name}: it offers {fp}, but {other.where} has a different "
                f"{short_type(other.key_type)} key (possible man-in-the-middle; "
                f"if the change is expected: ssh-keygen -R '{name}')",
            )
        if not t.accept_new or any(k.revoked for k in known):
            import shlex

            words = ["ssh"]
            if self.context.config_path:
                words += ["-F", self.context.config_path]
            if self.port is not None:
                words += ["-p", str(self.port)]
            words.append(f"{self.user}@{self.alias}" if self.user else self.alias)
            files = ", ".join(t.user_known_hosts[:1]) or "known_hosts"
            raise SSHError(
                "hostkey-unknown",
                f"host key of {name} is not in {files} ({fp}); verify it, then add it: "
                f"`{shlex.join(words)}` once, or rerun fleet-audit with --accept-new",
            )
        if not t.user_known_hosts:
            raise SSHError("config", "--accept-new needs a UserKnownHostsFile to write to")
        self.context.known_hosts.add(t.user_known_hosts[0], name, key_type, blob, t.hash_known_hosts)

    # -- authentication

    def _authenticate(self, transport: paramiko.Transport, t: Target, tried: list[str], notes: list[str],
                      refused: set[bytes]) -> bool:
        """True once logged in; False when an agent key refused to sign (the caller connects again)."""
        self.phase = "authentication"
        return authenticate(transport, t, self.context, Attempt(tried, notes, refused), self.remaining)

    def auth_refused(self, t: Target, tried: list[str], notes: list[str]) -> SSHError:
        return auth_refused(t, tried, notes)

    # -- run

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        """One exec: `/bin/sh -s` with the command (and any `input`, see stdin_script) on stdin."""
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
            raise self._host_error(exc) from exc

    def _window(self) -> int:
        """The session channel's window, which bounds what paramiko buffers unread: half the output
        allowed, paramiko's default (2 MiB) at most."""
        return min(DEFAULT_WINDOW_SIZE, max(self.max_output // 2, DEFAULT_MAX_PACKET_SIZE))

    def _exec(self, transport: paramiko.Transport, command: str, input: bytes | None) -> RunResult:
        self.phase = "opening the session"
        chan = transport.open_session(window_size=self._window(), timeout=self.remaining())
        try:
            self.phase = "exec"
            chan.settimeout(self.remaining())
            try:
                chan.exec_command(REMOTE_COMMAND)  # the one line every login shell parses alike
            except paramiko.SSHException as exc:
                if self._aborted or not transport.is_active():
                    raise
                raise SSHError("protocol", f"{self.target.hostname} refused to run {REMOTE_COMMAND!r} "
                               "(exec request denied)") from exc
            self.execs += 1
            self.phase = "sending the script"
            chan.sendall(stdin_script(command, input))
            chan.shutdown_write()
            self.phase = "reading the output"
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
                    self.remaining()  # an abort (or the deadline) closed the channel: a timeout
                    break
                out.append(data)
                size += len(data)
                if size > self.max_output:
                    raise self.too_much()
            self.phase = "waiting for the exit status"
            while not chan.exit_status_ready() and not chan.closed:
                chan.status_event.wait(min(self.remaining(), 0.5))
            self._read_stderr(chan, err, size)
            if not chan.exit_status_ready():
                self.remaining()
            rc = chan.recv_exit_status() if chan.exit_status_ready() else -1  # -1: killed, or cut off
            return RunResult(rc, b"".join(out), b"".join(err))
        finally:
            chan.close()

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

    # -- errors

    def _host_error(self, exc: BaseException) -> SSHError:
        """What a failure of paramiko or the socket means for this host: a timeout once it was aborted or
        its deadline passed (the phase cut short is named), else what the exception says."""
        sock = self._sock
        t = self._target
        where = f"{t.hostname} port {t.port}" if t else self.alias
        before_banner = not self.heard_banner()
        if sock is not None and sock.exceeded:
            if self.phase in ("banner", "key exchange", "host key check", "authentication"):
                return SSHError("protocol", f"{where} sent more than {sock.budget >> 10} KiB during {self.phase}: "
                                "the rest was not read")
            return self.too_much()
        if self._aborted or time.monotonic() >= self._deadline:
            return self._timeout_error()
        if isinstance(exc, socket.gaierror):
            return SSHError("resolve", f"cannot resolve {t.hostname if t else self.alias}: {exc.strerror}")
        if isinstance(exc, ConnectionRefusedError):
            return SSHError("refused", f"connection refused by {where}")
        if self._proxy is not None and isinstance(exc, EOFError | OSError | paramiko.SSHException) \
                and self.phase in ("banner", "key exchange", "connect") and (sock is None or not sock.heard):
            said = self._proxy.stderr_tail()
            said = f": {said}" if said else ", printing nothing on stderr"
            when = "before the SSH banner" if self.phase in ("banner", "connect") else f"during {self.phase}"
            return SSHError("proxy", f"ProxyCommand {self._proxy.how_it_ended()} {when}{said} "
                            f"(command: {self._proxy.command[:80]})")
        if before_banner and self.phase == "banner" and sock is not None:
            if sock.heard:
                via = " through the ProxyCommand" if self._proxy is not None else ""
                return SSHError("no-ssh", f"{where} does not speak SSH: it sent{via} {shown_bytes(sock.heard)} "
                                f"({sock.received} bytes, no SSH banner)")
            return SSHError("closed", f"{where} closed the connection before the SSH banner")
        if isinstance(exc, TimeoutError | socket.timeout):
            ct = f" after {t.connect_timeout:g}s (ConnectTimeout)" if t and t.connect_timeout else ""
            return SSHError("timeout", f"timed out{ct} during {self.phase} ({where})")
        if isinstance(exc, paramiko.AuthenticationException):
            return SSHError("auth", f"authentication failed for {where}: {exc}")
        if isinstance(exc, paramiko.SSHException):
            text = str(exc)
            if "protocol banner" in text or "Indecipherable protocol version" in text or "Invalid SSH banner" in text:
                return SSHError("no-ssh", f"{where} does not speak SSH ({shown_bytes(text.encode())})")
            said = shown_bytes(text.encode(), 200)
            return SSHError("protocol", f"SSH error during {self.phase} with {where}: {said}")
        if isinstance(exc, EOFError | ConnectionResetError | BrokenPipeError):
            return SSHError("closed", f"{where} closed the connection during {self.phase}")
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc) or type(exc).__name__
            kind = "unreachable" if exc.errno in (101, 113, 65, 51) else "closed"
            return SSHError(kind, f"{reason} ({where}, during {self.phase})")
        return SSHError("protocol", f"{type(exc).__name__} during {self.phase} with {where}: {str(exc)[:200]}")

    # -- close

    def _close_quietly(self, keep_proxy_note: bool = True) -> None:
        transport, self._transport = self._transport, None
        if self._sock is not None:
            self._sock.stop()  # wakes paramiko's thread from its read
        if transport is not None:
            try:
                transport.close()
            except Exception:
                pass
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        proxy = self._proxy  # kept for the error's words (its stderr) unless a new connection follows
        if proxy is not None:
            proxy.close()
            if not keep_proxy_note:
                self._proxy = None
        jump, self._jump = self._jump, None
        if jump is not None:
            jump.close()

    def close(self) -> None:
        self._close_quietly()

    def __enter__(self) -> SSHHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_jump(t: Target, jump: str) -> Target:
    import dataclasses

    return dataclasses.replace(t, proxy_jump=jump)
