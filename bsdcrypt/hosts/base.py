"""The Host seam: one `run` for the local machine, a recording, and SSH.

Everything that reads or changes a host goes through `Host.run`. Parsers and
the assessment never see which kind of host they got.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Protocol

from bsdcrypt.errors import HostError


def sh_quote(text: str) -> str:
    """Single-quote `text` for any POSIX sh (always quoted, so commands read the same everywhere)."""
    return "'" + text.replace("'", "'\\''") + "'"


@dataclass(frozen=True)
class RunResult:
    rc: int
    stdout: bytes
    stderr: bytes = b""

    @property
    def ok(self) -> bool:
        return self.rc == 0


class Host(Protocol):
    """A machine that can run one `sh -c` command line."""

    name: str
    spec: str

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        """Run `command` with /bin/sh; never raises for a non-zero exit status."""
        ...

    def close(self) -> None: ...


# What a Host runs to execute a command: the same one line on every kind of host. Over SSH the login
# shell parses it (sshd runs `$SHELL -c LINE`), and root's shell is csh/tcsh on FreeBSD before 14.0:
# csh cannot parse a quoted string spanning lines ("Unmatched '"), so the line holds no script, no
# quote and no newline, only what every shell reads alike. The script, and any input, go on stdin.
REMOTE_COMMAND = "/bin/sh -s"
_INPUT_CHUNK = 512  # bytes of input per printf line of the script


_PRINTF_SAFE = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 _+=.,:;/#@!?()[]{}<>*&^~|$\"`"
)


def _printf_octal(data: bytes) -> str:
    """A printf(1) format that prints exactly `data`: every byte that is not plainly safe in a
    single-quoted printf format (quote, backslash, %, controls, non-ASCII, NUL) as a 3-digit octal
    escape, which POSIX printf writes as that byte (FreeBSD's sh and printf(1), dash and bash alike).
    `-` is escaped too, so that no format starts like an option."""
    return "".join(chr(b) if b in _PRINTF_SAFE else f"\\{b:03o}" for b in data)


def stdin_script(command: str, input: bytes | None = None) -> bytes:
    """What `/bin/sh -s` (REMOTE_COMMAND) reads on stdin to run `command` with `input` on its stdin.

    Without input it is the command itself. With input, `command` runs in `/bin/sh -c` (a fresh
    shell, parsed alone, as it always was) with the input piped in by printf lines that spell every
    byte: binary content, NUL and a missing final newline come out byte for byte, and no delimiter
    can occur in the content (the script is printable ASCII only). Commands must not read the outer
    shell's stdin: it is the script itself.
    """
    if input is None:
        return command.encode()
    lines = ["bsdcrypt_input() {", "  :"]
    for i in range(0, len(input), _INPUT_CHUNK):
        lines.append(f"  printf '{_printf_octal(input[i:i + _INPUT_CHUNK])}'")
    lines += ["}", f"bsdcrypt_input | /bin/sh -c {sh_quote(command)} bsdcrypt", "exit $?", ""]
    return "\n".join(lines).encode()


class LocalHost:
    """This machine, via subprocess: `/bin/sh -s` with the script on stdin, as over SSH.

    `login_shell` (tests): run REMOTE_COMMAND through that shell's `-c`, as sshd does with the
    user's login shell (e.g. tcsh, root's shell on FreeBSD before 14.0).
    """

    spec = "local"

    def __init__(self, login_shell: str | None = None) -> None:
        import socket

        self.name = socket.gethostname()
        self.login_shell = login_shell

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        argv = REMOTE_COMMAND.split() if self.login_shell is None else [self.login_shell, "-c", REMOTE_COMMAND]
        try:
            proc = subprocess.run(
                argv,
                input=stdin_script(command, input),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise HostError(f"local command timed out after {timeout:g}s") from exc
        except OSError as exc:
            raise HostError(f"cannot run /bin/sh locally: {exc.strerror}") from exc
        return RunResult(proc.returncode, proc.stdout, proc.stderr)

    def close(self) -> None:
        return None


def parse_host_spec(spec: str | None) -> Host:
    """Turn a --host value into a Host: local, replay:FILE|NAME, or [user@]host[:port]."""
    from bsdcrypt.hosts.verbose import wrap  # -v: log every command run on the host

    return wrap(_make_host(spec))


def _make_host(spec: str | None) -> Host:
    if not spec or spec == "local":
        return LocalHost()
    if spec.startswith("replay:"):
        from bsdcrypt.recording import ReplayHost, resolve_recording

        host = ReplayHost.from_file(resolve_recording(spec[len("replay:"):]))
        host.spec = spec  # as the user gave it: `replay:NAME` stays stable when the venv moves
        return host
    from bsdcrypt.ssh import SSHHost  # paramiko stays off the local and replay paths

    return SSHHost.from_spec(spec)

