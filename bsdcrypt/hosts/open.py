"""The only host factory: a spec (hosts/spec.py) becomes a LocalHost, a ReplayHost or an SSHHost.

Each kind is imported only when asked for: paramiko stays off the local and replay paths, the
recording reader off the local and SSH paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bsdcrypt.hostapi import Host
from bsdcrypt.hosts import verbose
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.hostspec import REPLAY, is_local

if TYPE_CHECKING:
    from bsdcrypt.ssh import SSHContext


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
    spec: str | None,
    *,
    base_dir: str | None = None,
    ssh: SSHContext | None = None,
    timeout: float | None = None,
    max_output: int | None = None,
    single_run: bool = False,
) -> Host:
    """A Host for `local`, `replay:FILE|NAME` or `[user@]host[:port]`, wrapped for -v when it is on.

    A recording keeps its spec as written (`replay:NAME`, or the path as given), never where a shipped
    recording happens to be installed; a relative path is looked up first in `base_dir` (a hosts
    file's folder). `ssh`, `timeout`, `max_output` and `single_run` go to an SSH host: its client config,
    its deadline, how much output one command may return, and whether it runs one command only
    (then connects, runs and closes in the caller's thread: cheaper, see bsdcrypt/ssh/oneshot.py).
    """
    return verbose.wrap(_open(spec, base_dir, ssh, timeout, max_output, single_run))


def _open(
    spec: str | None,
    base_dir: str | None,
    ssh: SSHContext | None,
    timeout: float | None,
    max_output: int | None,
    single_run: bool = False,
) -> Host:
    if spec is None or is_local(spec):
        return LocalHost()
    if spec.startswith(REPLAY):  # any path, spaces included (a hosts file line cannot hold those)
        from bsdcrypt.hosts.replay import ReplayHost

        host = ReplayHost.from_file(replay_file(spec[len(REPLAY):], base_dir))
        host.spec = spec
        return host
    from bsdcrypt.ssh import SSHHost

    return SSHHost.from_spec(spec, ssh, timeout, max_output, single_run)


def parse_host_spec(spec: str | None) -> Host:
    """The host a command's --host names (open_host with the defaults)."""
    return open_host(spec)
