"""The Host seam: one `run` for the local machine, a recording, and SSH.

Everything that reads or changes a host goes through `Host.run`. Parsers and
the assessment never see which kind of host they got.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
    @property
    def kind(self) -> str:
        """What it is, for the few callers that must know: "local", "ssh" or "replay" (hosts/open.py
        makes each kind; wrappers such as VerboseHost pass their host's through)."""
        ...

    @property
    def can_exec(self) -> bool:
        """False for a recording: it answers the probe and nothing else, so nothing can change on it."""
        ...

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        """Run `command` with /bin/sh; never raises for a non-zero exit status."""
        ...

    def abort(self) -> None:
        """From another thread: make a `run` in flight give up soon (a no-op where none can hang)."""
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
