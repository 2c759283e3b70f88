"""The grammar of a host, as `--host` and hosts files write it (pure, no I/O).

    local                     this machine
    replay:FILE|NAME          a recording: a file, or the name of one shipped with bsdcrypt
    [user@]host[:port]        over SSH: a DNS name, an IPv4 address or a bracketed IPv6 address
    user@[2001:db8::7]:2222   IPv6 with a port must be bracketed; a bare IPv6 address (no port) too
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

REPLAY = "replay:"

# RFC 1123 labels, plus '_' (seen in real internal names and ssh_config aliases).
_NAME = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
_USER = re.compile(r"^[A-Za-z0-9_.](?:[A-Za-z0-9_.@-]*[A-Za-z0-9_.-])?\$?$")  # may hold '@' (user@realm), not end in it


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class SSHSpec:
    """An SSH host as the user wrote it (`--host`, a hosts-file line), parsed once and carried as is to the
    connection: `host` is a name or an address (IPv6 without brackets); user and port only if written."""

    text: str
    host: str
    user: str | None = None
    port: int | None = None


def parse_ssh(text: str) -> SSHSpec:
    """`[user@]host[:port]` (`ssh://` allowed in front) -> SSHSpec; SpecError with a one-line reason."""
    user, host, port = split_spec(text.removeprefix("ssh://"))
    return SSHSpec(text, host, user, port)


MAX_NAME = 253  # a DNS name's longest text form (RFC 1035: 255 octets on the wire)
MAX_PATH = 1024  # PATH_MAX on FreeBSD
_SHOWN = 60  # characters of a bad value quoted in an error


def quote_value(text: str) -> str:
    """A bad value as an error quotes it: repr(), cut at _SHOWN characters (a 100,000-character line
    is not echoed whole)."""
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN]!r}... ({len(text)} characters)"


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit()):  # isdigit() alone takes '²', which int() refuses
        raise SpecError(f"bad port {quote_value(text)}")
    port = int(text) if len(text) <= 20 else None  # int() refuses more than 4300 digits
    if port is None or not 1 <= port <= 65535:
        raise SpecError(f"port {quote_value(text) if port is None else port} is out of range 1-65535")
    return port


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True


def split_spec(spec: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` -> (user, host, port); IPv6 as `[addr]:port` or bare `addr`.

    Raises SpecError with a one-line reason.
    """
    text = spec.strip()
    if not text:
        raise SpecError("empty host")
    if any(ch.isspace() for ch in text):
        raise SpecError(f"{quote_value(text)} has spaces (one host per line)")
    user: str | None = None
    if "@" in text:
        user, _, text = text.rpartition("@")
        if not user or not _USER.match(user):
            raise SpecError(f"bad user name {quote_value(user)}")
    port: int | None = None
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise SpecError(f"{quote_value(text)}: '[' without ']'")
        host, rest = text[1:close], text[close + 1:]
        if not _is_ipv6(host):
            raise SpecError(f"{quote_value(host)} in brackets is not an IPv6 address")
        if rest:
            if not rest.startswith(":"):
                raise SpecError(f"unexpected {quote_value(rest)} after ']'")
            port = _port(rest[1:])
    elif text.count(":") > 1:
        if not _is_ipv6(text):
            raise SpecError(f"{quote_value(text)} is not an IPv6 address (write [addr]:port for a port)")
        host = text
    else:
        host, sep, port_text = text.partition(":")
        if sep:
            port = _port(port_text)
        if not host:
            raise SpecError("missing host name")
        if len(host) > MAX_NAME:
            raise SpecError(f"the host name is {len(host)} characters long: not a name (at most {MAX_NAME})")
        # one trailing dot: an absolute DNS name (localhost., fw1.example.org.), as ssh and DNS take it
        if not _NAME.match(host[:-1] if host.endswith(".") else host) or ".." in host:
            raise SpecError(f"bad host name {quote_value(host)}")
    return user, host, port


def replay_ref(spec: str) -> str | None:
    """The FILE|NAME of a `replay:` spec, None for any other spec; SpecError if it names nothing."""
    if not spec.startswith(REPLAY):
        return None
    ref = spec[len(REPLAY):]
    if not ref or any(ch.isspace() for ch in ref):
        raise SpecError("replay: needs one PATH or recording name")
    if len(ref) > MAX_PATH:
        raise SpecError(f"the replay: path is {len(ref)} characters long (at most {MAX_PATH})")
    return ref


def is_local(spec: str | None) -> bool:
    return not spec or spec == "local"
