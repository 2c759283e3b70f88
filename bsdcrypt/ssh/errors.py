"""The one error type of bsdcrypt.ssh."""

from __future__ import annotations

from bsdcrypt.errors import HostError


class SSHError(HostError):
    """A host could not be reached, verified, logged into, or did not finish the command.

    `kind` is a stable short code: resolve, refused, unreachable, timeout, no-ssh, closed,
    protocol, hostkey-unknown, hostkey-changed, hostkey-revoked, auth, no-keys, proxy, cut-off, config,
    garbage (a host printing more than the command allows).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
