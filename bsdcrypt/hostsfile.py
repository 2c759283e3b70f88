"""Hosts files for `bsdcrypt fleet-audit`: pure parsing, no I/O beyond the text given.

One host per line:

    [user@]host[:port]        # a DNS name, an IPv4 address or a bracketed IPv6 address
    user@[2001:db8::7]:2222   # IPv6 with a port must be bracketed
    2001:db8::7               # a bare IPv6 address (no port) is accepted too
    replay:PATH               # a recording, relative to the hosts file's folder
    # comments and blank lines are ignored; `host  # comment` too

Bad lines are collected and reported together, one per line as `FILE:LINE: problem`.
A host listed twice is audited once and reported once as a duplicate. `parse_hosts` compares the
lines as written (host names without case); `dedupe` takes another identity, such as fleet-audit's,
which compares what the ssh config makes of each line and resolved replay paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from bsdcrypt.errors import BsdcryptError
from bsdcrypt.hostspec import SpecError, SSHSpec, replay_ref, split_spec

MAX_ERRORS_SHOWN = 20
MAX_HOSTS_FILE = 16 << 20  # 16 MiB: a 100,000-host fleet is a few MiB


class HostsFileError(BsdcryptError):
    """One or more bad lines; str() lists them one per line as `FILE:LINE: problem` (the first 20)."""

    def __init__(self, problems: list[str], origin: str = "<hosts>") -> None:
        self.problems = problems
        shown = problems[:MAX_ERRORS_SHOWN]
        more = len(problems) - len(shown)
        self.lines = shown + ([f"{origin}: and {more} more bad lines"] if more > 0 else [])
        super().__init__("\n".join(self.lines))


@dataclass(frozen=True)
class HostEntry:
    """One host of the fleet, as written in the hosts file."""

    spec: str  # the text as written (without comment), e.g. "root@[::1]:2222" or "replay:x.yaml"
    source: str  # "FILE:LINE"
    host: str = ""  # name or address, IPv6 without brackets; empty for replay entries
    user: str | None = None
    port: int | None = None
    replay: str | None = None  # the PATH of a replay: entry, as written
    base_dir: str | None = None  # folder of the hosts file, for relative replay paths

    @property
    def is_replay(self) -> bool:
        return self.replay is not None

    @property
    def key(self) -> tuple[str, ...]:
        """Identity for duplicate detection."""
        if self.replay is not None:
            return ("replay", self.replay)
        return ("ssh", (self.user or ""), self.host.lower(), str(self.port or ""))

    @property
    def ssh(self) -> SSHSpec:
        """The SSH host of this line, as parsed when the file was read (never parsed again)."""
        return SSHSpec(self.ssh_spec, self.host, self.user, self.port)

    @property
    def ssh_spec(self) -> str:
        """The entry as a `--host` value (IPv6 re-bracketed when a port follows)."""
        if self.replay is not None:
            return f"replay:{self.replay}"
        host = self.host
        if self.port is not None and ":" in host:
            host = f"[{host}]"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port is not None else ""
        return f"{user}{host}{port}"


@dataclass
class Duplicate:
    spec: str
    first: str  # FILE:LINE of the entry that is kept
    others: list[str] = field(default_factory=list)  # FILE:LINE of each duplicate
    other_specs: list[str] = field(default_factory=list)  # how each duplicate is written

    def __str__(self) -> str:
        specs = self.other_specs or [self.spec] * len(self.others)
        also = ", ".join(w if s == self.spec else f"{w} as {s}" for w, s in zip(self.others, specs, strict=False))
        return f"{self.spec} is listed more than once ({self.first}, also {also}); audited once"


@dataclass
class HostsList:
    entries: list[HostEntry]
    duplicates: list[Duplicate]


def _strip_comment(line: str) -> str:
    # `#` starts a comment at the line start or after whitespace (so `replay:a#b.yaml` stays whole).
    text = line.strip()
    if text.startswith("#"):
        return ""
    match = re.search(r"\s#", text)
    return text[: match.start()].rstrip() if match else text


def _lines(text: str | bytes) -> list[str | UnicodeDecodeError]:
    """The lines of a hosts file; bytes are decoded line by line (a line that is not UTF-8 is its
    error, so it becomes `FILE:LINE: reason` like every other bad line)."""
    if isinstance(text, str):
        return list(text.removeprefix("\ufeff").splitlines())  # a BOM from Windows editors
    out: list[str | UnicodeDecodeError] = []
    for raw in text.removeprefix(b"\xef\xbb\xbf").splitlines():
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            out.append(exc)
    return out


def read_hosts(text: str | bytes, origin: str = "<hosts>", base_dir: str | None = None) -> list[HostEntry]:
    """Every host line of a hosts file, duplicates included; `origin` names it in errors ("-" reads as
    <stdin>). Raises HostsFileError listing every bad line."""
    name = "<stdin>" if origin == "-" else origin
    problems: list[str] = []
    entries: list[HostEntry] = []
    for number, raw in enumerate(_lines(text), start=1):
        where = f"{name}:{number}"
        if isinstance(raw, UnicodeDecodeError):
            problems.append(f"{where}: not UTF-8 text (byte 0x{raw.object[raw.start]:02x} at column {raw.start + 1})")
            continue
        body = _strip_comment(raw)
        if not body:
            continue
        try:
            path = replay_ref(body)
            if path is not None:
                entry = HostEntry(spec=body, source=where, replay=path, base_dir=base_dir)
            else:
                user, host, port = split_spec(body)
                entry = HostEntry(spec=body, source=where, host=host, user=user, port=port)
        except SpecError as exc:
            problems.append(f"{where}: {exc}")
            continue
        entries.append(entry)
    if problems:
        raise HostsFileError(problems, name)
    if not entries:
        raise HostsFileError([f"{name}: no hosts (only comments or blank lines)"], name)
    return entries


def dedupe(
    entries: Sequence[HostEntry], identity: Callable[[HostEntry], Hashable] | None = None
) -> HostsList:
    """Keep the first entry of each identity (default: the line as written, host name without case)."""
    key = identity or (lambda e: e.key)
    kept: list[HostEntry] = []
    seen: dict[Hashable, HostEntry] = {}
    dups: dict[Hashable, Duplicate] = {}
    for entry in entries:
        k = key(entry)
        first = seen.get(k)
        if first is None:
            seen[k] = entry
            kept.append(entry)
            continue
        dup = dups.setdefault(k, Duplicate(first.spec, first.source))
        dup.others.append(entry.source)
        dup.other_specs.append(entry.spec)
    return HostsList(kept, list(dups.values()))


def parse_hosts(text: str | bytes, origin: str = "<hosts>", base_dir: str | None = None) -> HostsList:
    """Parse the text of a hosts file; duplicates compared as written (see `dedupe`)."""
    return dedupe(read_hosts(text, origin, base_dir))
