"""Issue 26: a full /boot (GELI-root installs keep it on a small bootpool) must never leave an empty or
partial backup: the backup is written under a temporary name, checked complete, fsync'ed and renamed;
a failed or partial one is removed and the edit refused with one line, the file untouched.

Each case runs in a child inside its own mount namespace (`unshare -m`) on a tiny tmpfs mounted over a
temporary directory: never this machine's real paths, gone when the child exits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys
from pathlib import Path
from bsdcrypt.enable.act import safe_write
from bsdcrypt.enable.remote import read_loader_files
from bsdcrypt.errors import ActError
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.loader.conf import set_yes

root = Path(sys.argv[1]); free_pages = int(sys.argv[2])
boot = root / "boot"
boot.mkdir()
conf = boot / "loader.conf"
original = b'zfs_load="YES"\n' + b"# " + b"x" * 20000 + b"\n"
conf.write_bytes(original)
(edit,) = set_yes(read_loader_files(LocalHost(), str(root)), root=str(root))
filler = root / "filler"
fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)  # fill the file system to the last byte
try:
    while True:
        os.write(fd, b"\1" * 4096)
except OSError:
    pass
os.close(fd)
if free_pages:
    os.truncate(filler, max(0, filler.stat().st_size - free_pages * 4096))
try:
    safe_write(LocalHost(), edit, root=str(root))
    outcome = "written"
except ActError as exc:
    outcome = str(exc)
print(json.dumps({
    "outcome": outcome,
    "conf_unchanged": conf.read_bytes() == original,
    "left": sorted(p.name for p in boot.iterdir() if p.name not in ("loader.conf", ".bsdcrypt.lock")),
}))
"""


def _run(tmp_path: Path, size: str, free_pages: int) -> dict[str, object]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private tmpfs")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size="$2" tmpfs "$1" && exec "$3" -c "$4" "$1" "$5"',
         "sh", str(mnt), size, sys.executable, CHILD, str(free_pages)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )
    if r.returncode != 0 and "mount" in r.stderr:
        pytest.skip(f"no private tmpfs here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_no_room_for_the_backup_refuses_and_leaves_nothing(tmp_path: Path) -> None:
    got = _run(tmp_path, "128k", 0)
    outcome = str(got["outcome"])
    assert outcome != "written" and "\n" not in outcome
    assert "backup of" in outcome and "nothing changed" in outcome, outcome
    assert got["conf_unchanged"] is True
    assert got["left"] == []  # no empty loader.conf.bsdcrypt-<stamp>, no temporary file


def test_room_for_the_backup_but_not_the_new_file_refuses_and_removes_the_backup(tmp_path: Path) -> None:
    got = _run(tmp_path, "128k", 6)  # the 20 KB backup fits in 6 pages, the new content then does not
    outcome = str(got["outcome"])
    assert outcome != "written" and "\n" not in outcome
    assert outcome.endswith("nothing changed"), outcome
    assert got["conf_unchanged"] is True
    assert got["left"] == []


def test_with_room_the_write_goes_on_and_keeps_one_complete_backup(tmp_path: Path) -> None:
    got = _run(tmp_path, "128k", 16)
    assert got["outcome"] == "written", got
    assert got["conf_unchanged"] is False
    (backup,) = got["left"]
    assert str(backup).startswith("loader.conf.bsdcrypt-")
