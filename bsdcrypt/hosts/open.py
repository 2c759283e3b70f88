"""The only host factory: a spec (hostspec.py) becomes a LocalHost, a ReplayHost, an SSHHost (paramiko)
or an OpenSSHHost (the system ssh).

Each kind is imported only when asked for: paramiko stays off the local and replay paths, the
recording reader off the local and SSH paths.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bsdcrypt.errors import BsdcryptError
from bsdcrypt.hostapi import Host
from bsdcrypt.hosts import verbose
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.hostspec import REPLAY, SSHSpec, is_local

if TYPE_CHECKING:
    from bsdcrypt.ssh import SSHContext
    from bsdcrypt.ssh.openssh import OpenSSHContext

SSH_CLIENTS = ("paramiko", "openssh")  # --ssh: paramiko's public API in this process, or the system ssh


def replay_file(ref: str, base_dir: str | None = None) -> Path:
    """The recording a `replay:` ref names: relative to `base_dir` (a hosts file's folder) if that file
    exists, else the path as given, else a recording shipped with bsdcrypt."""
    from bsdcrypt.recording import resolve_recording

    path = Path(ref).expanduser()
    if base_dir is not None and not path.is_absolute():
        candidate = Path(base_dir) / path
        if candidate.is_file():
            return candidate
    return path if path.is_file() else resolve_recording(ref)


def open_host(
    spec: str | SSHSpec | None,
    *,
    base_dir: str | None = None,
    ssh: SSHContext | OpenSSHContext | None = None,
    timeout: float | None = None,
    max_output: int | None = None,
    client: str = "paramiko",
    on_slow: Callable[[str], None] | None = None,
) -> Host:
    """A Host for `local`, `replay:FILE|NAME` or `[user@]host[:port]`, wrapped for -v when it is on.

    A recording keeps its spec as written (`replay:NAME`, or the path as given), never where a shipped
    recording happens to be installed; a relative path is looked up first in `base_dir` (a hosts
    file's folder). `ssh`, `timeout` and `max_output` go to an SSH host: its client config (an
    SSHContext for paramiko, an OpenSSHContext for openssh), its deadline, how much output one command
    may return. `client` is --ssh; `on_slow` is told when a host is slow to answer.
    """
    if client not in SSH_CLIENTS:
        raise BsdcryptError(f"unknown SSH client {client!r}; choose one of: {', '.join(SSH_CLIENTS)}")
    return verbose.wrap(_open(spec, base_dir, ssh, timeout, max_output, client, on_slow))


def _open(
    spec: str | SSHSpec | None,
    base_dir: str | None,
    ssh: SSHContext | OpenSSHContext | None,
    timeout: float | None,
    max_output: int | None,
    client: str,
    on_slow: Callable[[str], None] | None,
) -> Host:
    if spec is None or isinstance(spec, str) and is_local(spec):
        return LocalHost()
    if isinstance(spec, str) and spec.startswith(REPLAY):  # any path, spaces included
        from bsdcrypt.hosts.replay import ReplayHost

        host = ReplayHost.from_file(replay_file(spec[len(REPLAY):], base_dir))
        host.spec = spec
        return host
    if client == "openssh":
        from bsdcrypt.ssh.openssh import OpenSSHContext, OpenSSHHost

        context = ssh if isinstance(ssh, OpenSSHContext) else None
        if context is None:  # single-host commands: as for paramiko, the environment names -F and accept-new
            import os

            context = OpenSSHContext(os.environ.get("BSDCRYPT_SSH_CONFIG") or None,
                                     accept_new=os.environ.get("BSDCRYPT_ACCEPT_NEW") == "1")
        return OpenSSHHost.from_spec(spec, context, timeout, max_output, on_slow)
    from bsdcrypt.ssh import SSHContext, SSHHost

    return SSHHost.from_spec(spec, ssh if isinstance(ssh, SSHContext) else None, timeout, max_output, on_slow)


def _note_on_terminal(note: str) -> None:
    """A note on stderr while a host is slow, only where a person watches (stderr a terminal)."""
    from bsdcrypt.text import MESSAGE_LIMIT, visible

    try:
        if sys.stderr.isatty():
            sys.stderr.write(f"bsdcrypt: {visible(note, MESSAGE_LIMIT)}\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


def parse_host_spec(spec: str | None, ssh: str = "paramiko") -> Host:
    """The host a command's --host names, over the SSH client --ssh names (open_host with the defaults);
    a slow SSH host gets a note on a terminal."""
    return open_host(spec, client=ssh, on_slow=_note_on_terminal)
