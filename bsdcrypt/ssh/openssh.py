"""`OpenSSHHost`: a host reached with the system's ssh client (`--ssh openssh`), one process per run.

    ssh -T -o BatchMode=yes -o ForwardAgent=no -o ClearAllForwardings=yes -o ConnectTimeout=N
        [-o StrictHostKeyChecking=accept-new] [-F FILE] [-p PORT] [-l USER] -- HOST /bin/sh -s

with the script on stdin, as admins and Ansible run it: certificates, host CAs, FIDO keys,
IdentityAgent, Include, Match, ProxyJump chains, ControlMaster and the user's algorithms are ssh's
business. bsdcrypt keeps the deadline (the process group is killed when it passes), the output cap
(stdout and stderr together) and the error rows, read from ssh's exit status 255 and its stderr.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bsdcrypt.hostapi import REMOTE_COMMAND, RunResult, stdin_script
from bsdcrypt.hostspec import SSHSpec
from bsdcrypt.ssh.driver import ABORTED, FAILED, OVERFLOW, TIMEOUT, Conversation, driver
from bsdcrypt.ssh.errors import SSHError, shown_bytes, ssh_spec
from bsdcrypt.ssh.files import check_regular
from bsdcrypt.ssh.includes import SYSTEM_CONFIG_DIR, read_config
from bsdcrypt.ssh.limits import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, MAX_OUTPUT, SLOW_NOTE_AFTER
from bsdcrypt.ssh.settings import find_ssh

_BACKSTOP = 5.0  # past the deadline, how long a host waits for the loop before giving up on it

# ssh's stderr (OpenSSH 7-9: ssh.c, sshconnect.c, sshconnect2.c, readconf.c) -> the error kind
_DIAGNOSTICS: tuple[tuple[str, str], ...] = (
    (r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed", "hostkey-changed"),
    (r"REVOKED HOST KEY|revoked by file|is marked as revoked", "hostkey-revoked"),
    (r"host key is known for|Host key verification failed|No matching host key", "hostkey-unknown"),
    (r"Permission denied \(|Too many authentication failures|No more authentication methods", "auth"),
    (r"Connection refused", "refused"),
    (r"timed out during banner exchange", "no-ssh"),
    (r"banner line contains invalid|invalid format|Bad protocol version", "no-ssh"),
    (r"Connection timed out|Operation timed out", "timeout"),
    (r"No route to host|Network is unreachable|Host is unreachable", "unreachable"),
    (r"Could not resolve hostname|Name or service not known|nodename nor servname", "resolve"),
    (r"proxy dialog|ProxyCommand|stdio forwarding failed|channel \d+: open failed|UNKNOWN port", "proxy"),
    (r"Bad configuration option|line \d+:|Bad owner or permissions|Can't open user config|"
     r"keyword .* extra arguments|Unsupported option", "config"),
    (r"Unable to negotiate|no matching|Corrupted MAC|incorrect signature|Bad packet length", "protocol"),
    (r"Connection closed by|Connection reset by|closed by remote host|Broken pipe", "closed"),
)


def _line(text: bytes) -> str:
    """One stderr line of ssh for an error row: printable, escaped, cut."""
    shown = shown_bytes(text.strip(), 200)
    return shown[1:-1] if shown.endswith("'") else shown[1:]


DIAGNOSED_TAIL = 8192  # bytes of ssh's stderr read for its diagnostic: its own lines come last


def ssh_failure(stderr: bytes, where: str) -> SSHError | None:
    """The error ssh's stderr describes (it exited 255), None if it printed no diagnostic we know. Only
    the tail is read: ssh's stderr also carries the remote's (which may exit 255 itself), and patterns
    such as `Host key for .* has changed` are quadratic over a long line of repeats."""
    stderr = stderr[-DIAGNOSED_TAIL:]
    lines = [ln for ln in stderr.replace(b"\r", b"\n").split(b"\n") if ln.strip()]
    text = b"\n".join(lines).decode("utf-8", "replace")
    for pattern, kind in _DIAGNOSTICS:
        m = re.search(pattern, text)
        if m is None:
            continue
        said = next((ln for ln in lines if re.search(pattern, ln.decode("utf-8", "replace"))), lines[-1])
        if kind.startswith("hostkey") and lines:  # ssh's last line says what it did ("verification failed")
            said = next((ln for ln in lines if b"host key" in ln.lower() and b"@@@" not in ln), said)
        return SSHError(kind, f"{where}: ssh: {_line(said)}")
    return None


@dataclass
class OpenSSHContext:
    """What every host of a run shares on this path: the ssh client, -F, accept-new. The config files
    and the usual known_hosts files are checked first (regular files only: a FIFO would hang ssh)."""

    config_path: str | None = None
    accept_new: bool = False
    ssh: str | None = field(default=None)

    def __post_init__(self) -> None:
        self.ssh = self.ssh or find_ssh()
        if not self.ssh:
            raise SSHError("config", "--ssh openssh needs the ssh client (not found on PATH)")
        if self.config_path is not None:
            path = os.path.expanduser(self.config_path)
            if not os.path.lexists(path):
                raise SSHError("config", f"no ssh config file at {self.config_path}")
            self.config_path = os.path.abspath(path)
            read_config(self.config_path, True)
        else:
            for path, user in ((os.path.expanduser("~/.ssh/config"), True), (SYSTEM_CONFIG_DIR + "/ssh_config", False)):
                if os.path.lexists(path):
                    read_config(path, user)
        for path in ("~/.ssh/known_hosts", "~/.ssh/known_hosts2", "/etc/ssh/ssh_known_hosts",
                     "/etc/ssh/ssh_known_hosts2"):
            check_regular(os.path.expanduser(path), "known_hosts file")

    def argv(self, host: str, user: str | None, port: int | None, connect_timeout: float) -> list[str]:
        assert self.ssh
        argv = [self.ssh, "-T", "-o", "BatchMode=yes", "-o", "ForwardAgent=no", "-o", "ClearAllForwardings=yes",
                "-o", f"ConnectTimeout={max(1, int(connect_timeout))}"]
        if self.accept_new:
            argv += ["-o", "StrictHostKeyChecking=accept-new"]
        if self.config_path:
            argv += ["-F", self.config_path]
        if port is not None:
            argv += ["-p", str(port)]
        if user:
            argv += ["-l", user]
        return argv + ["--", host, REMOTE_COMMAND]


class OpenSSHHost:
    """A host reached by running the system ssh; `abort()` may be called from any thread."""

    kind = "ssh"
    can_exec = True

    def __init__(self, alias: str, *, user: str | None = None, port: int | None = None,
                 context: OpenSSHContext | None = None, spec: str | None = None, timeout: float | None = None,
                 max_output: int = MAX_OUTPUT, on_slow: Callable[[str], None] | None = None) -> None:
        self.context = context or OpenSSHContext()
        self.on_slow = on_slow  # told once when ssh has printed nothing for SLOW_NOTE_AFTER seconds
        self.alias, self.user, self.port = alias, user, port
        self.name = alias
        self.spec = spec or alias
        self.timeout = timeout
        self.max_output = max_output
        self.execs = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._conv: Conversation | None = None
        self._aborted = False

    @classmethod
    def from_spec(cls, spec: str | SSHSpec, context: OpenSSHContext | None = None, timeout: float | None = None,
                  max_output: int | None = None, on_slow: Callable[[str], None] | None = None) -> OpenSSHHost:
        """A host from its spec: an SSHSpec parsed once upstream (a hosts file), or `--host` text, parsed here."""
        spec = ssh_spec(spec)
        user, host, port = spec.user, spec.host, spec.port
        return cls(host, user=user, port=port, context=context, spec=spec.text, timeout=timeout,
                   max_output=MAX_OUTPUT if max_output is None else max_output, on_slow=on_slow)

    def identity(self) -> tuple[object, ...]:
        """What makes two hosts-file lines one host on this path (ssh resolves the rest): as written."""
        return ("openssh", self.alias.lower(), self.user, self.port)

    @property
    def where(self) -> str:
        return f"{self.user}@{self.alias}" if self.user else self.alias

    def abort(self) -> None:
        self._aborted = True
        self._kill()
        if self._conv is not None:
            self._conv.abort()

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # ssh and its ProxyCommands
            except OSError:
                pass

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        limit = timeout if timeout is not None else (self.timeout or DEFAULT_TIMEOUT)
        deadline = time.monotonic() + limit
        if self._aborted:
            raise SSHError("timeout", f"timed out after {limit:g}s before ssh started")
        # ssh gives up on the connect and banner first (its own words in the row), before the deadline kills it
        argv = self.context.argv(self.alias, self.user, self.port, min(DEFAULT_CONNECT_TIMEOUT, max(1.0, limit * 0.8)))
        try:
            # start_new_session: its own process group, killed whole; nothing here keeps CPython from vfork()
            proc = subprocess.Popen(argv, bufsize=0, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise SSHError("config", f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
        self._proc = proc
        self.execs += 1
        slow = self.on_slow is not None
        conv = Conversation(proc, stdin_script(command, input), deadline, self.max_output,
                            SLOW_NOTE_AFTER if slow else None, self._slow_note if slow else None)
        self._conv = conv
        try:
            out, err = self._talk(conv, deadline, limit)
        finally:
            self._conv = None  # no cycle host -> conversation -> note -> host outliving the run
            self._kill()
            proc.wait()
            if conv.done.is_set():  # else the loop still holds them: it closes them when it lets go
                for pipe in (proc.stdin, proc.stdout, proc.stderr):
                    if pipe is not None:
                        pipe.close()
        rc = proc.returncode
        if rc == 255:
            failure = ssh_failure(err, self.where)
            if failure is not None or not out:
                raise failure or SSHError("closed", f"{self.where}: ssh exited with status 255"
                                          + (f": {_line(err.splitlines()[-1])}" if err.strip() else ""))
        return RunResult(rc if rc >= 0 else -1, out, err)

    def _slow_note(self) -> None:
        if self.on_slow is not None:
            self.on_slow(f"still waiting for {self.where}: ssh has printed nothing yet (connecting, "
                         "or the probe is still running)")

    def _talk(self, conv: Conversation, deadline: float, limit: float) -> tuple[bytes, bytes]:
        """Hand the conversation to the process's one ssh loop (ssh/driver.py) and sleep until it ends."""
        loop = driver()
        loop.drive(conv)
        if self._aborted:  # abort() may have come before the loop had it
            conv.abort()
        if not conv.done.wait(max(0.0, deadline - time.monotonic()) + _BACKSTOP):
            conv.abort()  # the loop missed the deadline (it never should): the host is not left hanging
            raise SSHError("timeout", f"timed out after {limit:g}s")
        outcome = ABORTED if self._aborted and conv.outcome is None else conv.outcome
        if outcome in (TIMEOUT, ABORTED):
            said = "" if conv.out else " (no output yet: still connecting?)"
            raise SSHError("timeout", f"timed out after {limit:g}s{said}")
        if outcome == OVERFLOW:
            shown = f"{self.max_output >> 20} MiB" if self.max_output >= 1 << 20 else f"{self.max_output >> 10} KiB"
            raise SSHError("garbage", f"the host printed more than {shown} (stdout and stderr together), "
                           "more than this command can print: the rest was not read")
        if outcome == FAILED:
            raise SSHError("closed", f"{self.where}: reading ssh's output failed: {conv.failure}")
        if conv.proc.returncode is None:  # its output closed: ssh is exiting (without a pidfd, not seen yet)
            try:
                conv.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                conv.kill()
                raise SSHError("timeout", f"timed out after {limit:g}s waiting for ssh to exit") from None
        return bytes(conv.out), bytes(conv.err)

    def close(self) -> None:
        self._kill()

    def __enter__(self) -> OpenSSHHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
