"""The act seam: the safe write and its undo for real on a temp dir (LocalHost + --root), all the files
of a run or none, the lock; kldload and verify on a fake Host."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from login_shells import login_shells, require_tcsh

from bsdcrypt.enable.act import kldload, perform, posix_cksum, safe_write, verify
from bsdcrypt.enable.plan import PlanInput, plan_disable, plan_enable
from bsdcrypt.enable.remote import read_loader_files
from bsdcrypt.errors import ActError
from bsdcrypt.hostapi import RunResult
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.loader.conf import EditError, FileEdit, effective, is_yes, restore, set_yes

from .conftest import backups, write


@pytest.mark.parametrize("data", [b"", b"hi\n", bytes(range(256)) * 3])
def test_posix_cksum_matches_cksum(data: bytes) -> None:
    if shutil.which("cksum") is None:
        pytest.skip("no cksum")
    out = subprocess.run(["cksum"], input=data, capture_output=True, check=True).stdout.decode().strip()
    assert out == posix_cksum(data)


@pytest.mark.slow
def test_enable_then_disable_on_disk(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    original = b'zfs_load="YES"\r\naesni_load="NO"\r\n'
    write(conf, original, 0o640)
    write(root / "boot" / "loader.conf.d" / "a.conf", b"x=1\n")
    host = LocalHost()
    files = read_loader_files(host, str(root))
    assert [p for p, _ in files] == [str(conf), str(root / "boot/loader.conf.d/a.conf")]

    for edit in set_yes(files, root=str(root)):
        result = safe_write(host, edit)
        assert result.backup is not None and Path(result.backup).read_bytes() == original  # backup = original
    assert stat.S_IMODE(conf.stat().st_mode) == 0o640  # mode kept
    after = read_loader_files(host, str(root))
    assert is_yes(effective(after, "aesni_load"))
    assert set_yes(after, root=str(root)) == []  # second run: nothing to do

    for edit in restore(after):
        safe_write(host, edit)
    assert conf.read_bytes() == original
    assert len(backups(conf.parent)) == 2
    assert not list(conf.parent.glob(".loader.conf.bsdcrypt.*"))  # no temp files left


def test_creates_missing_loader_conf(root: Path) -> None:
    host = LocalHost()
    (edit,) = set_yes(read_loader_files(host, str(root)), root=str(root))
    assert not edit.existed
    result = safe_write(host, edit)
    conf = root / "boot" / "loader.conf"
    assert result.backup is None and conf.read_bytes() == edit.after
    assert stat.S_IMODE(conf.stat().st_mode) == 0o644


@pytest.mark.parametrize("target", ["/etc-loader.conf", "../etc-loader.conf"])
def test_follows_symlinked_loader_conf(root: Path, target: str) -> None:
    """An absolute link in the system at --root means a path inside it, as for the loader (sysrc -R)."""
    real = root / "etc-loader.conf"
    write(real, b"a=1\n")
    (root / "boot" / "loader.conf").symlink_to(target)
    host = LocalHost()
    (edit,) = set_yes(read_loader_files(host, str(root)), root=str(root))
    safe_write(host, edit, root=str(root))
    assert (root / "boot" / "loader.conf").is_symlink()
    assert real.read_bytes() == b'a=1\naesni_load="YES" # bsdcrypt enable: added\n'
    assert backups(root) and backups(root)[0].read_bytes() == b"a=1\n"


def test_crash_between_write_and_rename_leaves_original(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    host = LocalHost()
    (edit,) = set_yes(read_loader_files(host, str(root)), root=str(root))
    with pytest.raises(ActError):
        safe_write(host, edit, crash_before_rename=True)
    assert conf.read_bytes() == b"a=1\n"
    # The killed run left its temporary file (not read by the loader) and a complete backup.
    assert [b.read_bytes() for b in backups(conf.parent)] == [b"a=1\n"]
    # A later run still works.
    safe_write(host, edit)
    assert conf.read_bytes() == edit.after


def test_changed_since_read_changes_nothing(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    (edit,) = set_yes(read_loader_files(LocalHost(), str(root)), root=str(root))
    write(conf, b"a=2\n")
    with pytest.raises(ActError, match="changed since bsdcrypt read it"):
        safe_write(LocalHost(), edit)
    assert conf.read_bytes() == b"a=2\n" and not backups(conf.parent)


def test_missing_directory_is_one_line(tmp_path: Path) -> None:
    edit = FileEdit(str(tmp_path / "nope" / "boot" / "loader.conf"), b"", b"x=1\n", existed=False)
    with pytest.raises(ActError) as exc:
        safe_write(LocalHost(), edit)
    assert "does not exist" in str(exc.value) and "\n" not in str(exc.value)


class NobodyHost(LocalHost):
    """Runs commands as an unprivileged user, to get real permission errors when tests run as root."""

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if os.geteuid() != 0:
            return super().run(command, input=input, timeout=timeout)
        wrapped = "exec setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c " + _sq(command)
        return super().run(wrapped, input=input, timeout=timeout)


def _sq(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="needs setpriv when root")
def test_permission_error_is_clear_and_changes_nothing() -> None:
    root = Path(tempfile.mkdtemp(prefix="bsdcrypt-perm-"))  # pytest's tmp dirs are not traversable by nobody
    (root / "boot" / "loader.conf.d").mkdir(parents=True)
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    os.chmod(root, 0o755)
    os.chmod(root / "boot", 0o755)  # not writable for nobody
    (edit,) = set_yes(read_loader_files(LocalHost(), str(root)), root=str(root))
    with pytest.raises(ActError) as exc:
        safe_write(NobodyHost(), edit)
    msg = str(exc.value)
    assert "permission denied" in msg and "\n" not in msg
    assert conf.read_bytes() == b"a=1\n" and not backups(conf.parent)
    assert sorted(p.name for p in conf.parent.iterdir()) == ["loader.conf", "loader.conf.d"]
    shutil.rmtree(root)


# ---- kldload and verify on a fake host -----------------------------------------------------------


class FakeHost:
    name = "fake"
    spec = "fake"

    def __init__(self, answers: dict[str, RunResult]) -> None:
        self.answers = answers
        self.commands: list[str] = []

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        self.commands.append(command)
        for key, res in self.answers.items():
            if key in command:
                return res
        return RunResult(127, b"", b"sh: not found\n")

    def close(self) -> None:
        return None


@pytest.mark.parametrize(
    ("rc", "stderr", "ok", "text"),
    [
        (0, b"", True, "loaded"),
        (1, b"kldload: can't load aesni: module already loaded or in kernel\n", True, "nothing to load"),
        (
            1,
            b"kldload: an error occurred while loading module aesni. "
            b"Please check dmesg(8) for more details.\n",
            False,
            "ENOEXEC",
        ),
        (1, b"kldload: can't load aesni: Operation not permitted\n", False, "securelevel"),
        (1, b"kldload: can't load aesni: No such file or directory\n", False, "not found"),
    ],
)
def test_kldload_translation(rc: int, stderr: bytes, ok: bool, text: str) -> None:
    host = FakeHost({"kldload": RunResult(rc, b"", stderr)})
    if ok:
        assert text in kldload(host, "aesni")
    else:
        with pytest.raises(ActError, match=text):
            kldload(host, "aesni")
    assert host.commands == ["LC_ALL=C kldload 'aesni'"]


def test_verify() -> None:
    good = FakeHost({"sysctl": RunResult(0, b"AES-CBC,AES-CCM,AES-GCM,AES-ICM,AES-XTS\n")})
    assert "AES-XTS" in verify(good, "aesni")
    with pytest.raises(ActError, match="no aesni0 device"):
        verify(FakeHost({"sysctl": RunResult(1, b"", b"sysctl: unknown oid 'dev.aesni.0.%desc'\n")}), "aesni")
    with pytest.raises(ActError, match="SHA1,SHA256 only"):
        verify(FakeHost({"sysctl": RunResult(0, b"SHA1,SHA256\n")}), "aesni")


def test_perform_runs_plan_in_order_on_fake_host() -> None:
    inp = PlanInput(driver="aesni", state="not-loaded", cpu_aes=True, is_root=True, persisted=False)
    plan = plan_enable(inp, [], persist=False)
    host = FakeHost({"kldload": RunResult(0, b""), "sysctl": RunResult(0, b"AES-CBC,AES-XTS\n")})
    result = perform(host, plan)
    assert host.commands == ["LC_ALL=C kldload 'aesni'", "LC_ALL=C sysctl -n 'dev.aesni.0.%desc'"]
    assert result.lines[-1] == "aesni0 attached: AES-CBC,AES-XTS"


def test_perform_refuses_a_refused_plan() -> None:
    inp = PlanInput(driver="aesni", state="not-loaded", cpu_aes=False)
    host = FakeHost({})
    with pytest.raises(ActError, match="no AES instructions"):
        perform(host, plan_enable(inp))
    assert host.commands == []


def test_perform_disable_on_disk(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1")
    host = LocalHost()
    inp = PlanInput(driver="aesni", state="loaded", attached=True, accelerates_aes=True, is_root=True)
    perform(host, plan_enable(inp, read_loader_files(host, str(root)), persist=True, root=str(root)))
    assert b"aesni_load" in conf.read_bytes()
    perform(host, plan_disable(read_loader_files(host, str(root))))
    assert conf.read_bytes() == b"a=1"


def test_a_failed_write_leaves_no_backup_or_temp_file(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    (edit,) = set_yes(read_loader_files(LocalHost(), str(root)), root=str(root))
    conf.write_bytes(b"a=2\n")  # changed behind our back: the write must stop before the rename
    with pytest.raises(ActError, match="changed since"):
        safe_write(LocalHost(), edit, root=str(root))
    assert conf.read_bytes() == b"a=2\n"
    assert sorted(p.name for p in (root / "boot").iterdir() if p.name != ".bsdcrypt.lock") == ["loader.conf", "loader.conf.d"]


# ---- owner kept, all-or-nothing, read-only file systems, the lock ---------------------------------

needs_nobody = pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None, reason="needs setpriv when root"
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def traversable_root() -> Path:
    """A --root that the unprivileged user can reach (pytest's tmp dirs are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="bsdcrypt-act-"))
    os.chmod(root, 0o755)
    (root / "boot" / "loader.conf.d").mkdir(parents=True)
    os.chmod(root / "boot", 0o755)
    os.chmod(root / "boot" / "loader.conf.d", 0o755)
    return root


def tree(root: Path) -> dict[str, tuple[bytes, int, int, int, int]]:
    """Every file under root: bytes, mode, uid, gid, mtime (ns), lock files left out."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != ".bsdcrypt.lock":
            st = p.stat()
            out[str(p.relative_to(root))] = (p.read_bytes(), st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)
    return out


def enable_plan(root: Path, release: str | None = None) -> object:
    inp = PlanInput(driver="aesni", state="loaded", attached=True, accelerates_aes=True, root_release=release)
    return plan_enable(inp, read_loader_files(LocalHost(), str(root)), persist=True, root=str(root), force=True)


@needs_root
def test_owner_group_and_mode_are_kept(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n", 0o640)
    os.chown(conf, 1234, 4321)
    (edit,) = set_yes(read_loader_files(LocalHost(), str(root)), root=str(root))
    result = safe_write(LocalHost(), edit)
    for p in (conf, Path(result.backup or "")):
        st = p.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 4321, 0o640), p
    assert Path(result.backup or "").read_bytes() == b"a=1\n"


@needs_nobody
@pytest.mark.parametrize(
    ("owner", "mode", "message"),
    [
        ((0, 0), 0o666, "cannot keep the owner of {conf} (uid 0) writing as uid 65534: run as root"),
        ((65534, 0), 0o666, "cannot keep the group of {conf} (gid 0): uid 65534 is not a member; run as root"),
        # a read-only file of that user: the real file is named, not the temporary one
        ((65534, 65534), 0o444, "cannot write {conf}: permission denied (run as root?)"),
    ],
    ids=["owner", "group", "read-only-file"],
)
def test_a_user_who_cannot_keep_owner_group_or_mode_changes_nothing(
    owner: tuple[int, int], mode: int, message: str
) -> None:
    """`cp -p` run by a user who is not root silently gives the copy that user's owner: refuse first."""
    root = traversable_root()
    try:
        os.chmod(root / "boot", 0o777)  # the directory is writable for nobody: only the file's owner stops it
        conf = root / "boot" / "loader.conf"
        write(conf, b"a=1\n", mode)
        os.chown(conf, *owner)
        before = tree(root)
        host = NobodyHost()
        plan = enable_plan(root)
        with pytest.raises(ActError) as exc:
            perform(host, plan, root=str(root))  # type: ignore[arg-type]
        assert str(exc.value) == message.format(conf=conf) + "; nothing changed"
        assert tree(root) == before and not list((root / "boot").glob(".loader.conf.bsdcrypt.*"))
        # the write itself checks too (if the file changed hands after the check): nothing replaced
        if mode == 0o666:
            (edit,) = plan.writes  # type: ignore[attr-defined]
            with pytest.raises(ActError, match="cannot keep the owner, group and mode of"):
                safe_write(host, edit.edit, root=str(root))
            assert tree(root) == before
    finally:
        shutil.rmtree(root)


@needs_nobody
def test_several_files_are_checked_before_any_is_written() -> None:
    """QA: loader.conf.d writable by nobody, boot/ not: x.conf must not be rewritten before
    loader.conf.local fails."""
    root = traversable_root()
    try:
        d = root / "boot" / "loader.conf.d"
        write(d / "x.conf", b'aesni_load="no"\n')
        write(root / "boot" / "loader.conf.local", b'aesni_load="NO"\n')
        os.chown(d, 65534, 65534)
        os.chown(d / "x.conf", 65534, 65534)
        before = tree(root)
        plan = enable_plan(root, "13.2-RELEASE")
        assert [w.edit.path for w in plan.writes] == [str(d / "x.conf"), str(root / "boot/loader.conf.local")]  # type: ignore[attr-defined]
        with pytest.raises(ActError) as exc:
            perform(NobodyHost(), plan, root=str(root))  # type: ignore[arg-type]
        assert str(exc.value) == (
            f"cannot write in {root}/boot: permission denied or read-only file system (run as root?); "
            "nothing changed"
        )
        assert tree(root) == before
    finally:
        shutil.rmtree(root)


class SabotageHost(LocalHost):
    """Changes files behind bsdcrypt's back after its Nth write script (a failure in the middle)."""

    def __init__(self, after_writes: int, sabotage: list[tuple[Path, bytes]]) -> None:
        super().__init__()
        self.after_writes = after_writes
        self.sabotage = sabotage
        self.writes = 0

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        res = super().run(command, input=input, timeout=timeout)
        if "bsdcrypt.bsdcrypt-" not in command and ".bsdcrypt-$(date" in command:  # a write script
            self.writes += 1
            if self.writes == self.after_writes:
                for path, data in self.sabotage:
                    path.write_bytes(data)
        return res


@pytest.mark.slow
def test_a_failure_in_the_middle_of_several_files_undoes_the_earlier_ones(root: Path) -> None:
    d = root / "boot" / "loader.conf.d"
    write(d / "x.conf", b'aesni_load="no"\r\n', 0o640)
    local = root / "boot" / "loader.conf.local"
    write(local, b'aesni_load="NO"\n')
    os.utime(d / "x.conf", ns=(1_000_000_000, 1_000_000_000))
    before = tree(root)
    plan = enable_plan(root, "13.2-RELEASE")
    # after x.conf is written, someone edits loader.conf.local: its write stops (changed since read)
    host = SabotageHost(1, [(local, b'aesni_load="NO" # edited meanwhile\n')])
    with pytest.raises(ActError) as exc:
        perform(host, plan, root=str(root))  # type: ignore[arg-type]
    msg = str(exc.value)
    assert msg == (
        f"{local} changed since bsdcrypt read it; nothing written, run again; "
        f"put back {d / 'x.conf'} as it was: the loader configuration is unchanged"
    )
    after = tree(root)
    assert after.pop("boot/loader.conf.local")[0] == b'aesni_load="NO" # edited meanwhile\n'
    before.pop("boot/loader.conf.local")
    assert after == before  # x.conf: same bytes, mode, owner and mtime (the backup renamed back); no backups


def test_when_the_undo_fails_too_it_says_where_the_backups_are(root: Path) -> None:
    d = root / "boot" / "loader.conf.d"
    write(d / "x.conf", b'aesni_load="no"\n')
    local = root / "boot" / "loader.conf.local"
    write(local, b'aesni_load="NO"\n')
    plan = enable_plan(root, "13.2-RELEASE")
    host = SabotageHost(1, [(local, b"changed\n"), (d / "x.conf", b"changed too\n")])
    with pytest.raises(ActError) as exc:
        perform(host, plan, root=str(root))  # type: ignore[arg-type]
    msg = str(exc.value)
    (bak,) = backups(d)
    assert "\n" not in msg and "undoing the earlier changes failed too" in msg
    assert f"{d / 'x.conf'} changed since bsdcrypt wrote it; left as it is (the original is {bak})" in msg
    assert bak.read_bytes() == b'aesni_load="no"\n' and (d / "x.conf").read_bytes() == b"changed too\n"


def test_the_check_runs_before_kldload() -> None:
    inp = PlanInput(driver="aesni", state="not-loaded", cpu_aes=True, is_root=True, persisted=False)
    plan = plan_enable(inp, [("/boot/loader.conf", b"")], persist=True)
    host = FakeHost({"me=$(id -u)": RunResult(0, b"cannot write in /boot: read-only file system (or an immutable flag)\n")})
    with pytest.raises(ActError, match="^cannot write in /boot: read-only file system .*; nothing changed$"):
        perform(host, plan)
    assert len(host.commands) == 1 and "kldload" not in host.commands[0]


def _ro_mount_works(path: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1"', "sh", str(path)],
        capture_output=True,
        check=False,
    )
    return r.returncode == 0


class ReadOnlyHost(LocalHost):
    """Runs each command in a private mount namespace where `ro` is bind-mounted read-only (a real
    EROFS, never visible outside the namespace)."""

    def __init__(self, ro: Path) -> None:
        super().__init__()
        self.ro = ro

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        wrapped = (
            "exec unshare -m sh -c 'mount --bind \"$1\" \"$1\" && mount -o remount,ro,bind \"$1\" \"$1\" && "
            f"exec /bin/sh -c \"$2\"' sh {_sq(str(self.ro))} {_sq(command)}"
        )
        return super().run(wrapped, input=input, timeout=timeout)


@pytest.mark.parametrize("what", ["root", "loader.conf.d"])
def test_a_read_only_file_system_is_one_line_and_changes_nothing(root: Path, what: str) -> None:
    if not _ro_mount_works(root):
        pytest.skip("no private read-only bind mount here (needs root and unshare)")
    write(root / "boot" / "loader.conf.d" / "x.conf", b'aesni_load="NO"\n')
    write(root / "boot" / "loader.conf.local", b'aesni_load="NO"\n')
    before = tree(root)
    ro = root if what == "root" else root / "boot" / "loader.conf.d"
    plan = enable_plan(root, "13.2-RELEASE")
    with pytest.raises(ActError) as exc:
        perform(ReadOnlyHost(ro), plan, root=str(root))  # type: ignore[arg-type]
    more = " (and 1 more)" if what == "root" else ""  # both files are on it: the first is named
    d = root / "boot" / "loader.conf.d"
    assert str(exc.value) == f"cannot write in {d}: read-only file system (or an immutable flag){more}; nothing changed"
    assert tree(root) == before


def test_the_lock_serializes_two_runs(root: Path) -> None:
    """Two runs planned from the same content: while another holds the lock neither writes; then the
    first writes and the second finds the file changed and writes nothing."""
    import fcntl
    import threading

    if shutil.which("lockf") is None and shutil.which("flock") is None:
        pytest.skip("neither lockf nor flock")
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    (edit,) = set_yes(read_loader_files(LocalHost(), str(root)), root=str(root))
    outcomes: list[str] = []

    def run() -> None:
        try:
            safe_write(LocalHost(), edit, root=str(root))
            outcomes.append("wrote")
        except ActError as exc:
            outcomes.append(str(exc))

    with open(root / "boot" / ".bsdcrypt.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        threads[0].join(1.0)
        assert conf.read_bytes() == b"a=1\n" and not backups(root / "boot") and outcomes == []
        fcntl.flock(lock, fcntl.LOCK_UN)
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == sorted(["wrote", f"{conf} changed since bsdcrypt read it; nothing written, run again"])
    assert conf.read_bytes() == edit.after and len(backups(root / "boot")) == 1


@pytest.mark.slow
def test_a_lock_held_too_long_is_certain_and_writes_nothing(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run holds the lock past the wait: one line, a certain failure (the body never ran),
    not "may or may not hold the new content"; the file, its directory and the plan's run unchanged."""
    import fcntl

    from bsdcrypt.enable import act
    from bsdcrypt.enable.act import WriteFailed
    from bsdcrypt.enable.plan import Plan, WriteFile

    if shutil.which("lockf") is None and shutil.which("flock") is None:
        pytest.skip("neither lockf nor flock")
    monkeypatch.setattr(act, "LOCK_WAIT_SECONDS", 1)
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    files = read_loader_files(LocalHost(), str(root))
    (edit,) = set_yes(files, root=str(root))
    before = tree(root)
    with open(root / "boot" / ".bsdcrypt.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held until the end of the block: no timing involved
        with pytest.raises(WriteFailed) as exc:
            safe_write(LocalHost(), edit, root=str(root))
        assert str(exc.value) == f"another bsdcrypt holds the lock on {edit.path}; nothing written"
        assert exc.value.certain and exc.value.renamed is None
        with pytest.raises(ActError) as whole:
            perform(LocalHost(), Plan([WriteFile(edit, "w")]), root=str(root))
        assert str(whole.value) == f"another bsdcrypt holds the lock on {edit.path}; nothing written"
        assert "may or may not" not in str(whole.value)
    assert tree(root) == before and conf.read_bytes() == b"a=1\n" and not backups(root / "boot")


_CONTENT = st.one_of(
    st.binary(max_size=300),
    st.lists(
        st.sampled_from(
            [b'aesni_load="NO"', b"aesni_load=yes", b"# c", b"", b"\xe9\xff=1", b"a = 1\t# t", b'x="a"b"', b"\r"]
        ),
        max_size=6,
    ).flatmap(lambda ls: st.sampled_from([b"\n", b"\r\n"]).map(lambda eol: eol.join(ls))),
)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(data=_CONTENT, mode=st.sampled_from([0o644, 0o640, 0o600, 0o444]))
def test_property_the_backup_equals_the_original_byte_for_byte(data: bytes, mode: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="bsdcrypt-prop-"))
    try:
        (root / "boot").mkdir()
        conf = root / "boot" / "loader.conf"
        write(conf, data, mode)
        os.utime(conf, ns=(1_500_000_000_123_456_789, 1_500_000_000_123_456_789))
        host = LocalHost()
        files = read_loader_files(host, str(root))
        assert files == [(str(conf), data)]
        try:
            edits = set_yes(files, root=str(root))
        except EditError:  # the editor refuses what it cannot prove correct: nothing to write
            edits = []
        assume(edits)  # already YES: nothing to write, so no backup
        (edit,) = edits
        result = safe_write(host, edit)
        bak = Path(result.backup or "")
        assert bak.read_bytes() == data and conf.read_bytes() == edit.after
        st_bak = bak.stat()
        assert stat.S_IMODE(st_bak.st_mode) == mode and stat.S_IMODE(conf.stat().st_mode) == mode
        assert st_bak.st_mtime_ns == 1_500_000_000_123_456_789  # cp -p: the backup keeps the original's times
        # and disable's own backup is the enabled file, byte for byte
        (undo,) = restore(read_loader_files(host, str(root)))
        result2 = safe_write(host, undo)
        assert Path(result2.backup or "").read_bytes() == edit.after
    finally:
        shutil.rmtree(root)


# ---- the one remote command line, whatever the login shell ------------------------------------------


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=2000))
def test_the_input_reaches_the_command_byte_for_byte(data: bytes) -> None:
    from bsdcrypt.hostapi import stdin_script

    script = stdin_script("cat", data)
    assert script.isascii() and b"\x00" not in script  # nothing a shell could mangle
    for shell in login_shells():
        res = LocalHost(shell).run("cat; printf 'rc'", input=data)
        assert res.rc == 0 and res.stdout == data + b"rc"


@pytest.mark.parametrize("data", [b"", b"no final newline", b"\x00\x01\xff'\\%s%%-n\n\n", bytes(range(256)) * 4])
def test_the_input_through_a_tcsh_login_shell(data: bytes) -> None:
    """sshd runs `$SHELL -c LINE`; with tcsh (FreeBSD root before 14.0) a multi-line quoted LINE fails."""
    res = LocalHost(require_tcsh()).run("cat; exit 7", input=data)
    assert (res.rc, res.stdout, res.stderr) == (7, data, b"")


def test_enable_and_disable_through_a_tcsh_login_shell(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    original = b'zfs_load="YES"\r\n# caf\xe9 \'quoted\' "%s" \\\naesni_load="NO"'
    write(conf, original)
    host = LocalHost(require_tcsh())
    inp = PlanInput(driver="aesni", state="loaded", attached=True, accelerates_aes=True, is_root=True)
    out = perform(host, plan_enable(inp, read_loader_files(host, str(root)), persist=True, root=str(root)), root=str(root))
    assert out.writes and is_yes(effective(read_loader_files(host, str(root)), "aesni_load"))
    perform(host, plan_disable(read_loader_files(host, str(root))), root=str(root))
    assert conf.read_bytes() == original


# ---- any failure in the middle rolls back, and says what state each file is in ----------------------


class FailingHost(LocalHost):
    """Fails the Nth write script: `when` is "before" (raise without running it) or "after" (run it,
    then raise, as a connection lost once the host had done it); `edit` rewrites the script first."""

    def __init__(self, nth: int, exc: BaseException | None = None, when: str = "before",
                 edit: tuple[str, str] | None = None) -> None:
        super().__init__()
        self.nth, self.exc, self.when, self.edit = nth, exc, when, edit
        self.writes = 0

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
        if ".bsdcrypt-$(date" in command:  # a write script
            self.writes += 1
            if self.writes == self.nth:
                if self.edit is not None:
                    assert self.edit[0] in command
                    command = command.replace(*self.edit)
                if self.exc is not None and self.when == "before":
                    raise self.exc
                res = super().run(command, input=input, timeout=timeout)
                if self.exc is not None:
                    raise self.exc
                return res
        return super().run(command, input=input, timeout=timeout)


def _two_files(root: Path) -> tuple[Path, Path, object]:
    d = root / "boot" / "loader.conf.d"
    write(d / "x.conf", b'aesni_load="no"\n')
    local = root / "boot" / "loader.conf.local"
    write(local, b'aesni_load="NO"\n')
    return d / "x.conf", local, enable_plan(root, "13.2-RELEASE")


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_lost_connection_on_the_second_write_puts_the_first_back(root: Path, when: str) -> None:
    from bsdcrypt.errors import HostError

    first, second, plan = _two_files(root)
    with pytest.raises(ActError) as exc:
        perform(FailingHost(2, HostError("connection lost"), when), plan, root=str(root))  # type: ignore[arg-type]
    msg = str(exc.value)
    assert msg.startswith(f"connection lost; put back {first} as it was; {second} may or may not hold the new content")
    assert "unchanged" not in msg  # the second file's state is not known: never claimed
    assert first.read_bytes() == b'aesni_load="no"\n' and not backups(first.parent)
    assert (second.read_bytes() == b'aesni_load="NO"\n') is (when == "before")


def test_ctrl_c_on_the_second_write_puts_the_first_back_and_says_so(root: Path) -> None:
    from bsdcrypt.enable.act import ActInterrupted

    first, second, plan = _two_files(root)
    with pytest.raises(ActInterrupted) as exc:
        perform(FailingHost(2, KeyboardInterrupt()), plan, root=str(root))  # type: ignore[arg-type]
    assert isinstance(exc.value, KeyboardInterrupt)
    assert str(exc.value).startswith(f"interrupted: put back {first} as it was; {second} may or may not hold")
    assert first.read_bytes() == b'aesni_load="no"\n' and second.read_bytes() == b'aesni_load="NO"\n'


def test_renamed_but_the_directory_fsync_failed_is_put_back(root: Path) -> None:
    """The new content was in place when the write failed: it is rolled back like the others."""
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    plan = enable_plan(root, "12.4-RELEASE")
    host = FailingHost(1, edit=('syncf "$DIR" || die "renamed', 'false || die "renamed'))
    with pytest.raises(ActError) as exc:
        perform(host, plan, root=str(root))  # type: ignore[arg-type]
    assert str(exc.value) == (
        f"renamed, but cannot fsync the directory {conf.parent}; put back {conf} as it was: "
        "the loader configuration is unchanged"
    )
    assert conf.read_bytes() == b"a=1\n" and not backups(conf.parent)


def test_a_write_that_does_not_read_back_is_put_back(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    plan = enable_plan(root, "12.4-RELEASE")
    host = FailingHost(1, edit=('cat -- "$TGT"', 'cat -- "$TGT"; echo garbage'))
    with pytest.raises(ActError) as exc:
        perform(host, plan, root=str(root))  # type: ignore[arg-type]
    assert str(exc.value).startswith(f"{conf} does not read back as written; the backup is {conf}.bsdcrypt-")
    assert str(exc.value).endswith(f"; put back {conf} as it was: the loader configuration is unchanged")
    assert conf.read_bytes() == b"a=1\n"


def test_a_write_cut_off_without_a_word_is_not_called_unchanged(root: Path) -> None:
    """Killed before it said why (SIGKILL, cut connection): the file's state is unknown."""
    conf = root / "boot" / "loader.conf"
    write(conf, b"a=1\n")
    plan = enable_plan(root, "12.4-RELEASE")
    host = FailingHost(1, edit=("err=$(mv -f", "kill -KILL $$; err=$(mv -f"))
    with pytest.raises(ActError) as exc:
        perform(host, plan, root=str(root))  # type: ignore[arg-type]
    assert f"{conf} may or may not hold the new content" in str(exc.value)
    assert conf.read_bytes() == b"a=1\n"


def test_sigterm_on_the_second_write_puts_the_first_back(root: Path) -> None:
    import signal

    from bsdcrypt.enable.act import ActInterrupted

    first, second, plan = _two_files(root)

    class TermHost(FailingHost):
        def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None) -> RunResult:
            if ".bsdcrypt-$(date" in command and self.writes == 1:
                os.kill(os.getpid(), signal.SIGTERM)
            return super().run(command, input=input, timeout=timeout)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(ActInterrupted) as exc:
        perform(TermHost(0), plan, root=str(root))  # type: ignore[arg-type]
    assert str(exc.value).startswith(f"interrupted (SIGTERM): put back {first} as it was; {second} may or may not")
    assert first.read_bytes() == b'aesni_load="no"\n' and second.read_bytes() == b'aesni_load="NO"\n'
    assert signal.getsignal(signal.SIGTERM) == before  # handler restored


def test_lockf_keeps_its_lock_file() -> None:
    """FreeBSD lockf(1) without -k unlinks the lock file on release: two runs could each hold a lock
    (one on the unlinked file, one on a new file). -k keeps one file, so exclusion holds and waiters
    are served in turn; flock (Linux, tests) keeps its file anyway."""
    from bsdcrypt.enable.act import write_script

    edit = FileEdit("/boot/loader.conf", b"a=1\n", b"a=2\n")
    script = write_script(edit)
    assert 'lockf -k -t "$WAIT" "$LOCK" /bin/sh -c "$BODY" ' in script
    assert 'flock -E 75 -w "$WAIT" "$LOCK" /bin/sh -c "$BODY" ' in script
    assert "WAIT=30\n" in script
    assert "exec lockf" not in script and "exec flock" not in script
    assert "lockf -t" not in script
