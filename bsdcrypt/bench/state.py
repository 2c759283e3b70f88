"""The bench's state file on the host and who owns what it records.

Each md unit a bench creates is recorded, before it is used, as one line of STATE_FILE on the host:
`<boottime> <mdN> <pid>@<machine> <type> <bytes> <run id> <controller id>`. A later bench (or
`bench --cleanup`) removes a unit only when the line proves it is a leftover of a bench that is gone:
same boot, owner dead on this very machine, and the unit as recorded.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path


def controller_name() -> str:
    """The machine running bsdcrypt, as written into the state file's owner field."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:255] or "localhost"


# This bsdcrypt process: a random run id, so that each of its state entries is its own beyond doubt.
RUN_ID = secrets.token_hex(8)
# Where a per-machine id may be read (systemd/dbus machine-id, FreeBSD's /etc/hostid), else one of our own.
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id", "/etc/hostid")


@functools.cache
def controller_id() -> str:
    """16 hex digits naming the machine bsdcrypt runs on (the controller), not its hostname: two
    controllers called alike (`localhost`, cloned VMs) must not take each other's bench for theirs.

    Hashed from the machine's own id (machine-id, FreeBSD /etc/hostid), else from a random id kept in
    `$XDG_STATE_HOME/bsdcrypt/controller-id` (~/.local/state): another user on the same machine then
    counts as another controller, which only ever refuses. "-" if neither can be had.
    """
    for path in MACHINE_ID_FILES:
        try:
            text = Path(path).read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            continue
        if len(text) >= 8:
            return hashlib.sha256(f"bsdcrypt-controller:{text}".encode()).hexdigest()[:16]
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "bsdcrypt" / "controller-id"
    try:
        text = state.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        text = ""
    if re.fullmatch(r"[0-9a-f]{16}", text):
        return text
    try:
        state.parent.mkdir(parents=True, exist_ok=True)
        text = secrets.token_hex(8)
        state.write_text(text + "\n", encoding="ascii")
        return text
    except OSError:
        return "-"


def this_owner() -> str:
    """`<pid>@<machine>` of this bsdcrypt process: who owns the md units it creates."""
    return f"{os.getpid()}@{controller_name()}"


def owner_status(owner: str, controller: str | None = None) -> str:
    """"alive", "dead", or "elsewhere" (a bsdcrypt on another machine: cannot be checked from here).

    The owning process runs where bsdcrypt ran (this machine for --host local; the admin's machine
    over SSH), so the check is kill(pid, 0) on this machine, and only when the owner is this machine:
    its name AND, for entries that record one, its controller id (another machine with the same
    hostname is "elsewhere"). Anything doubtful counts as alive or elsewhere: a wrong "alive" only
    refuses, a wrong "dead" would destroy.
    """
    pid_text, _, where = owner.partition("@")
    if where != controller_name():
        return "elsewhere"
    if controller is not None and (controller == "-" or controller != controller_id()):
        return "elsewhere"
    try:
        pid = int(pid_text)
    except ValueError:
        return "elsewhere"
    if pid <= 0:
        return "elsewhere"
    if pid == os.getpid():
        return "alive"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except (OSError, OverflowError):  # EPERM: exists under another user
        return "alive"
    return "alive"


# One line of the state file, strictly ASCII (str.isdigit() also takes '¹' or '٣', which int() refuses):
# `<boottime> <mdN>` (first format), `... <pid>@<machine> <type> <bytes>` (second),
# `... <run id> <controller id>` (current). Fields are separated by blanks.
_F = r"[ \t]+"
_STATE_LINE = re.compile(
    r"[ \t]*(?P<boottime>[0-9]{1,20})" + _F + r"(?P<md>md[0-9]{1,6})"
    r"(?:" + _F + r"(?P<owner>[0-9]{1,10}@[A-Za-z0-9._-]{1,255}|-)" + _F + r"(?P<type>[a-z]{1,16}|-)"
    + _F + r"(?P<size>[0-9]{1,20}|-)"
    r"(?:" + _F + r"(?P<run>[0-9a-f]{16})" + _F + r"(?P<controller>[0-9a-f]{16}|-))?)?[ \t]*",
    re.ASCII,
)


@dataclass(frozen=True)
class StateEntry:
    """One line of the state file: `<boottime> <mdN> <pid>@<machine> <type> <bytes> <run> <controller>`.

    Lines of the first format (`<boottime> <mdN>`) have no owner, type or size; lines of the second
    no run id and controller id (their owner is judged by the machine's name alone). `raw` is the
    line as read, so that it can be removed as it is.
    """

    boottime: int
    md: str
    owner: str | None = None
    type: str | None = None
    size: int | None = None
    run: str | None = None
    controller: str | None = None
    raw: str | None = field(default=None, compare=False)

    def line(self) -> str:
        """The line to write; ValueError if a field could break the format (or the shell)."""
        size = "-" if self.size is None else str(self.size)
        text = f"{self.boottime} {self.md} {self.owner or '-'} {self.type or '-'} {size}"
        if self.run is not None:
            text += f" {self.run} {self.controller or '-'}"
        if not _STATE_LINE.fullmatch(text):
            raise ValueError(f"refusing to write a malformed state entry: {text!r}")
        return text


def parse_state(text: str, bad: list[str] | None = None) -> list[StateEntry]:
    """The entries of the state file; other non-blank lines are skipped (and added to `bad`)."""
    entries: list[StateEntry] = []
    for line in text.splitlines():
        m = _STATE_LINE.fullmatch(line)
        if m is None:
            if line.strip() and bad is not None:
                bad.append(line)
            continue
        g = m.groupdict()
        owner = g["owner"] if g["owner"] not in (None, "-") else None
        kind = g["type"] if g["type"] not in (None, "-") else None
        size = int(g["size"]) if g["size"] not in (None, "-") else None
        entries.append(StateEntry(int(g["boottime"]), g["md"], owner, kind, size, g["run"], g["controller"], line))
    return entries
