"""Writes over SSH to a host whose login shell is csh-like (tcsh: root's shell on FreeBSD before 14.0).

sshd runs the exec'd command line through the user's login shell (`$SHELL -c LINE`); the fake host
here does exactly that with tcsh, for real, on a temporary --root tree. A script (or any quoted
multi-line string) in that line is parsed by tcsh, which cannot ("Unmatched '''"): the line must be
`/bin/sh -s` for every command, file contents included.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from login_shells import require_tcsh

from bsdcrypt.enable.act import safe_write, undo_write
from bsdcrypt.enable.remote import read_loader_files
from bsdcrypt.loader.conf import FileEdit

from .conftest import require_sshd, start_or_skip
from .loopback import LoopbackFleet

TCSH_ADDR = "127.4.0.1"
SH_ADDR = "127.4.0.2"


@pytest.fixture(scope="module")
def shell_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackFleet]:
    require_sshd()
    tcsh = require_tcsh()
    fleet = LoopbackFleet(tmp_path_factory.mktemp("sshd-shells") / "fleet")
    fleet.add(TCSH_ADDR, "shell", shell=tcsh)
    fleet.add(SH_ADDR, "shell", shell="/bin/sh")
    start_or_skip(fleet, TCSH_ADDR)
    try:
        yield fleet
    finally:
        fleet.stop()


def ssh_host(fleet: LoopbackFleet, addr: str):  # type: ignore[no-untyped-def]
    from bsdcrypt.ssh import SSHContext, SSHHost

    return SSHHost.from_spec(fleet.spec(addr), SSHContext(str(fleet.ssh_config)), timeout=30)


CONTENTS = [
    b'zfs_load="YES"\n',
    b'a="1"\r\nno final newline',
    b"binary \x00\x01\xff\xfe '\\'' \"%s%%\\n\\\\ $HOME `id` -n\n\n",
    bytes(range(256)) * 5,
    b"",
]


@pytest.mark.slow
@pytest.mark.parametrize("addr", [TCSH_ADDR, SH_ADDR])
@pytest.mark.parametrize("after", CONTENTS, ids=lambda b: f"{len(b)}B")
def test_safe_write_over_ssh_is_byte_exact(shell_fleet: LoopbackFleet, tmp_path: Path, addr: str, after: bytes) -> None:
    (tmp_path / "boot").mkdir()
    conf = tmp_path / "boot" / "loader.conf"
    conf.write_bytes(b"a=1\n")
    host = ssh_host(shell_fleet, addr)
    try:
        files = read_loader_files(host, str(tmp_path))
        assert files == [(str(conf), b"a=1\n")]
        edit = FileEdit(str(conf), b"a=1\n", after, existed=True)
        result = safe_write(host, edit, root=str(tmp_path))
        assert conf.read_bytes() == after
        assert result.backup and Path(result.backup).read_bytes() == b"a=1\n"
        undo_write(host, edit, result, root=str(tmp_path))
        assert conf.read_bytes() == b"a=1\n"
    finally:
        host.close()


@pytest.mark.slow
def test_every_exec_is_the_one_line(shell_fleet: LoopbackFleet, tmp_path: Path) -> None:
    """What sshd handed the login shell: always `/bin/sh -s`, writes included (no script, no quote)."""
    (tmp_path / "boot").mkdir()
    log = shell_fleet.hostdir / f"{TCSH_ADDR}.commands"
    log.unlink(missing_ok=True)
    host = ssh_host(shell_fleet, TCSH_ADDR)
    try:
        edit = FileEdit(str(tmp_path / "boot" / "loader.conf"), b"", b"x=1\n", existed=False)
        safe_write(host, edit, root=str(tmp_path))
        read_loader_files(host, str(tmp_path))
    finally:
        host.close()
    assert log.read_text().splitlines() == ["/bin/sh -s", "/bin/sh -s"]
