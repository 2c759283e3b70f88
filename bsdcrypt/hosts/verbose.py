"""`-v/--verbose`: show on stderr every command run on each host, and how it ended.

`wrap(host)` returns the host unchanged unless verbose mode is on; then a VerboseHost that logs
each `run` before and after delegating. The probe is one sh script; it is shown as the list of
read-only commands it runs. Lines are written whole under a lock, so a fleet's hosts interleave
by line, each line naming its host.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TextIO

from bsdcrypt.hostapi import Host, RunResult

_enabled = os.environ.get("BSDCRYPT_VERBOSE", "") not in ("", "0")
_lock = threading.Lock()


def enable(on: bool = True) -> None:
    global _enabled
    _enabled = on


def enabled() -> bool:
    return _enabled


def probe_commands() -> list[str]:
    """What the probe script runs, one command a line (as built by probe.build_script)."""
    from bsdcrypt.probe import CONF_DIR_GLOBS, FILES, LOADER_CONF_DIR, MODULE_FILES, STEPS

    return [
        *(cmd for _, cmd in STEPS),
        *(f"cat {path}" for path in FILES),
        "cat " + " ".join(f"{LOADER_CONF_DIR}/{g}" for g in CONF_DIR_GLOBS),
        "cat what loader_conf_files, loader_conf_dirs and local_loader_conf_files name",
        *(f"test -e {path}" for path in MODULE_FILES),
    ]


def describe(command: str, replay: bool = False) -> list[str]:
    from bsdcrypt.probe import PROBE_MAGIC

    if PROBE_MAGIC in command:
        steps = probe_commands()
        if replay:
            head = f"replay the recording (nothing runs; it answers the probe's {len(steps)} steps):"
        else:
            head = f"run the read-only probe (one sh script, {len(steps)} steps):"
        return [head, *(f"  {c}" for c in steps)]
    lines = command.strip("\n").splitlines() or [""]
    return [f"$ {lines[0]}", *(f"  {line}" for line in lines[1:])]


class VerboseHost:
    """A Host that logs the commands run through it to stderr."""

    def __init__(self, host: Host, stream: TextIO | None = None) -> None:
        self._host = host
        self._stream = stream
        self.name = host.name
        self.spec = host.spec

    @property
    def kind(self) -> str:
        return self._host.kind

    @property
    def can_exec(self) -> bool:
        return self._host.can_exec

    def _log(self, lines: list[str]) -> None:
        stream = self._stream or sys.stderr
        with _lock:
            from bsdcrypt.text import visible  # a spec or an error can carry host text

            stream.write("".join(f"bsdcrypt: {visible(self.spec)}: {visible(line, None)}\n" for line in lines))
            stream.flush()

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        lines = describe(command, replay=self.kind == "replay")
        if input:
            lines[0] += f"  (with {len(input)} bytes on stdin)"
        self._log(lines)
        start = time.monotonic()
        try:
            result = self._host.run(command, input=input, timeout=timeout)
        except Exception as exc:
            self._log([f"failed after {time.monotonic() - start:.2f}s: {exc}"])
            raise
        self._log([
            f"exit {result.rc}, {len(result.stdout)} bytes out, {len(result.stderr)} bytes err, "
            f"{time.monotonic() - start:.2f}s"
        ])
        return result

    def abort(self) -> None:
        self._host.abort()

    def close(self) -> None:
        self._host.close()

    def __getattr__(self, attr: str) -> Any:  # evidence, provenance, ... of the wrapped host
        return getattr(self._host, attr)


def unwrap(host: Host) -> Host:
    """The host under any VerboseHost."""
    while isinstance(host, VerboseHost):
        host = host._host
    return host


def wrap(host: Host) -> Host:
    return VerboseHost(host) if _enabled and not isinstance(host, VerboseHost) else host
