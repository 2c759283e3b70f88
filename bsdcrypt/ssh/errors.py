"""The one error type of bsdcrypt.ssh, and how a peer's bytes are shown in its messages."""

from __future__ import annotations

from bsdcrypt.errors import HostError
from bsdcrypt.hostspec import SpecError, SSHSpec, parse_ssh, quote_value


class SSHError(HostError):
    """A host could not be reached, verified, logged into, or did not finish the command.

    `kind` is a stable short code: resolve, refused, unreachable, timeout, no-ssh, closed,
    protocol, hostkey-unknown, hostkey-changed, hostkey-revoked, auth, no-keys, proxy, cut-off, config,
    garbage (a host printing more than the command allows).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def shown_bytes(data: bytes, limit: int = 60) -> str:
    """A peer's bytes quoted for an error line: printable ASCII as is, the rest escaped (\\r, \\x1b),
    at most about `limit` characters."""
    parts: list[str] = []
    size = 0
    for byte in data:
        if size >= limit:
            return "'" + "".join(parts) + "'…"
        part = bytes([byte]).decode("latin-1").encode("unicode_escape").decode("ascii").replace("'", "\\'")
        parts.append(part)
        size += len(part)
    return "'" + "".join(parts) + "'"


def shown_names(names: list[str], limit: int = 120) -> str:
    """A server's list of names (auth methods, algorithms) for an error line: joined by ", " when it is
    plain printable ASCII and short, else quoted and escaped as `shown_bytes` does."""
    joined = ", ".join(names)
    if len(joined) <= limit and joined.isascii() and joined.isprintable():
        return joined
    return shown_bytes(joined.encode("utf-8", "replace"), limit)


# What a row says when the paramiko path cannot honour what the config or known_hosts asks for.
OPENSSH_HINT = "use --ssh openssh (the system ssh client) for this host"


def ssh_spec(spec: str | SSHSpec) -> SSHSpec:
    """An SSHSpec parsed once upstream (a hosts file) as it is, or `--host` text parsed here; a bad one is
    a config row."""
    if not isinstance(spec, str):
        return spec
    try:
        return parse_ssh(spec)
    except SpecError as exc:
        raise SSHError("config", f"bad host {quote_value(spec)}: {exc}") from exc
