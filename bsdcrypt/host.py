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


class LocalHost:
    """This machine, via subprocess."""

    spec = "local"

    def __init__(self) -> None:
        import socket

        self.name = socket.gethostname()

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", command],
                input=input,
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
    from bsdcrypt.verbose import wrap  # -v: log every command run on the host

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

