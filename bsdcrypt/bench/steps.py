"""The commands of one bench on one host, each run under a step name: a failure says which step failed."""

from __future__ import annotations

from collections.abc import Callable

from bsdcrypt.bench.model import BenchError
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.hostapi import Host, RunResult
from bsdcrypt.interrupts import reason_of


def first_line(res: RunResult) -> str:
    """What a failed command said, in one line (its last line when it said much)."""
    for blob in (res.stderr, res.stdout):
        text = blob.decode("utf-8", errors="replace").strip()
        if text:
            return text.splitlines()[-1] if len(text.splitlines()) > 3 else " ".join(text.split())
    return f"exit status {res.rc}"


class Steps:
    """Runs commands on the host under a step name; collects the run's warnings and progress lines, and
    an interrupt that cleanup swallowed to finish its work (re-raised by the caller afterwards)."""

    def __init__(self, host: Host, progress: Callable[[str], None] | None = None) -> None:
        self.host = host
        self.step: str | None = None
        self.progress = progress or (lambda _msg: None)
        self.warnings: list[str] = []
        self.interrupted: str | None = None  # an interrupt arrived while cleanup ran

    def run(self, step: str, command: str, *, timeout: float | None = 120.0) -> RunResult:
        self.step = step
        try:
            return self.host.run(command, timeout=timeout)
        except BsdcryptError as exc:  # HostError: unreachable, timed out
            raise BenchError(step, str(exc)) from exc

    def must(self, step: str, command: str, *, timeout: float | None = 120.0) -> RunResult:
        res = self.run(step, command, timeout=timeout)
        if not res.ok:
            raise BenchError(step, f"`{command}` failed: {first_line(res)}")
        return res

    def text(self, step: str, command: str) -> str:
        """stdout of a command that must succeed."""
        return self.must(step, command).stdout.decode(errors="replace")

    def note(self, exc: BaseException) -> None:
        """An interrupt that cleanup swallowed to finish its work; re-raised afterwards."""
        if isinstance(exc, KeyboardInterrupt) and self.interrupted is None:
            self.interrupted = reason_of(exc)
