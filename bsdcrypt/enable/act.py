"""The act seam: perform a Plan on a Host, through `host.run` only (local, replay-refusing, SSH alike).

* kldload with its errors translated (the strings are sbin/kldload/kldload.c's);
* verification through `sysctl -n dev.<driver>.0.%desc`;
* the safe write: ONE POSIX sh snippet per file, run as `/bin/sh -s` with the new content spelled
  inside it (see `write_script` and docs/enable.md for every step and why), and its undo. The shell
  is in bsdcrypt/enable/sh/*.sh (read by `remote.shell_text`, shared with the reads); Python only sets
  its variables.

What is read from the host (the loader files, the system at --root DIR, where a path really is) is in
bsdcrypt.enable.remote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bsdcrypt.enable.plan import Note, Plan, Refuse, RunCommand, WriteFile
from bsdcrypt.enable.remote import shell_text
from bsdcrypt.errors import ActError, BsdcryptError
from bsdcrypt.hostapi import Host, RunResult, sh_quote
from bsdcrypt.interrupts import Interrupted, signals_deferred, signame_of, sigterm_raises
from bsdcrypt.loader.conf import FileEdit

KLD_EEXIST = "module already loaded or in kernel"
KLD_ENOEXEC = "Please check dmesg(8) for more details"
_OK = "bsdcrypt-write: ok"


def _crc_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        crc = i << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else (crc << 1)
        table.append(crc & 0xFFFFFFFF)
    return tuple(table)


_CRC = _crc_table()


def posix_cksum(data: bytes) -> str:
    """What POSIX `cksum < file` prints (CRC and length), on FreeBSD and GNU alike."""
    crc = 0
    table = _CRC
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ table[(crc >> 24) ^ byte]
    n = len(data)
    while n:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ table[(crc >> 24) ^ (n & 0xFF)]
        n >>= 8
    return f"{(~crc) & 0xFFFFFFFF} {len(data)}"


# ---- the safe write --------------------------------------------------------------------------------

# The shell that runs on the host lives in bsdcrypt/enable/sh/ (checked by shellcheck: tests/enable/
# test_shellcheck.py): resolve.sh (shared with the reads), lib.sh (die, syncf, attrs, samepath), check.sh,
# write.sh, undo.sh and wrapper.sh (the lock). Python only puts them together and sets their variables,
# each value quoted by sh_quote: no text is substituted into them.


# Seconds a write or an undo waits for another run's lock on the directory before it gives up
# (nothing written). Tests lower it.
LOCK_WAIT_SECONDS = 30


def _locked(
    body: str,
    path: str,
    *,
    existed: bool,
    cksum: str,
    root: str,
    backup: str = "",
    busy: str = "nothing written",
    new_cksum: str = "",
    crash: bool = False,
) -> str:
    """The wrapper that resolves `path`, takes the lock and runs `body` (write.sh or undo.sh) under it."""
    values: dict[str, str | int] = {
        "F": path,
        "EXISTED": int(existed),
        "CKSUM": cksum,
        "NEWSUM": new_cksum,
        "ROOT": root.rstrip("/"),
        "BAK": backup,
        "CRASH": int(crash),
        "WAIT": int(LOCK_WAIT_SECONDS),
        "BUSY": busy,
        "BODY": shell_text("lib.sh") + shell_text(body),
    }
    return "\n".join(
        [
            *(f"{name}={v if isinstance(v, int) else sh_quote(v)}" for name, v in values.items()),
            "PATH=/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin; export PATH",
            "LC_ALL=C; export LC_ALL",
            shell_text("resolve.sh"),
            shell_text("lib.sh"),
            shell_text("wrapper.sh"),
        ]
    )


def write_script(edit: FileEdit, *, root: str = "", crash_before_rename: bool = False) -> str:
    """The sh snippet that replaces `edit.path` with the bytes on its stdin (see docs/enable.md)."""
    return _locked(
        "write.sh", edit.path, existed=edit.existed, cksum=posix_cksum(edit.before), root=root,
        new_cksum=posix_cksum(edit.after), crash=crash_before_rename,
    )


def check_script(edits: list[FileEdit], *, root: str = "") -> str:
    """The sh snippet that says, one line per file, why any of `edits` could not be written."""
    lines = [
        f"ROOT={sh_quote(root.rstrip('/'))}",
        "PATH=/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin; export PATH",
        "LC_ALL=C; export LC_ALL",
        shell_text("resolve.sh"),
        shell_text("lib.sh"),
        shell_text("check.sh"),
    ]
    lines += [f"check {sh_quote(e.path)} {'1' if e.existed else '0'}" for e in edits]
    lines.append("exit 0")
    return "\n".join(lines)


def check_writable(host: Host, edits: list[FileEdit], *, root: str = "") -> None:
    """Before any file is written: every target's directory writable (temp file + rename), the file
    readable and writable, its owner and group keepable by this user. ActError (one line) otherwise."""
    if not edits:
        return
    res = host.run(check_script(edits, root=root), timeout=60)
    problems = [ln for ln in res.stdout.decode("utf-8", "replace").splitlines() if ln.strip()]
    if res.rc != 0 and not problems:
        detail = res.stderr.decode("utf-8", "replace").strip().splitlines()
        problems = [detail[-1] if detail else f"the check failed with exit status {res.rc}"]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ActError(f"{problems[0]}{more}; nothing changed")


@dataclass(frozen=True)
class WriteResult:
    path: str
    backup: str | None
    target: str = ""  # the file really written: `path` with every link resolved (inside DIR with --root)


class WriteFailed(ActError):
    """`safe_write` did not complete. `renamed`: the new content IS in place (the rename happened,
    what followed failed: the directory's fsync, the read-back), with its backup; `certain`: the
    snippet itself said why it stopped before the rename, so the file is as it was. Neither: it
    was cut off (killed, connection lost) and nothing is known."""

    def __init__(self, message: str, *, renamed: WriteResult | None = None, certain: bool = False) -> None:
        super().__init__(message)
        self.renamed = renamed
        self.certain = certain and renamed is None


def _fail_line(res: RunResult, what: str) -> str:
    lines = [ln for ln in res.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    msg = next((ln for ln in reversed(lines) if ln.startswith("bsdcrypt-write: ")), None)
    if msg:
        return msg.removeprefix("bsdcrypt-write: ")
    detail = lines[-1] if lines else f"exit status {res.rc}"
    return f"{what} failed: {detail}"


_RENAMED = b"bsdcrypt-write: renamed "


def safe_write(host: Host, edit: FileEdit, *, root: str = "", crash_before_rename: bool = False) -> WriteResult:
    """Write one FileEdit on the host, then re-read and re-parse it. Raises WriteFailed (one line)."""
    script = write_script(edit, root=root, crash_before_rename=crash_before_rename)
    res = host.run(script, input=edit.after, timeout=120)
    renamed: WriteResult | None = None
    rest = res.stdout
    if rest.startswith(_RENAMED):
        head, _, rest = rest.partition(b"\n")
        target, _, rest = rest.partition(b"\n")
        backup = head[len(_RENAMED):].decode("utf-8", "replace").strip()
        renamed = WriteResult(edit.path, None if backup in ("", "-") else backup, target.decode("utf-8", "replace"))
    ok = _OK.encode() + b"\n"
    if res.rc != 0 or renamed is None or not rest.startswith(ok):
        said = any(ln.startswith(b"bsdcrypt-write: ") for ln in res.stderr.splitlines())
        raise WriteFailed(_fail_line(res, f"writing {edit.path}"), renamed=renamed, certain=said)
    if rest[len(ok):] != edit.after:
        raise WriteFailed(
            f"{edit.path} does not read back as written; the backup is {renamed.backup or 'none (new file)'}",
            renamed=renamed,
        )
    return renamed


def undo_write(host: Host, edit: FileEdit, result: WriteResult, *, root: str = "") -> None:
    """Put back what `safe_write` replaced (its backup), or remove the file it created; only if the
    file still holds exactly what it wrote. Raises ActError (one line)."""
    script = _locked(
        "undo.sh",
        edit.path,
        existed=edit.existed,
        cksum=posix_cksum(edit.after),
        root=root,
        backup=result.backup or "",
        busy="left as it is",
    )
    res = host.run(script, timeout=120)
    if res.rc != 0 or not res.stdout.startswith(_OK.encode()):
        raise ActError(_fail_line(res, f"undoing the change to {edit.path}"))


# ---- kldload and verification ----------------------------------------------------------------------


def kldload(host: Host, driver: str) -> str:
    """Load the driver; returns a one-line outcome, raises ActError with plain advice."""
    res = host.run(f"LC_ALL=C kldload {sh_quote(driver)}", timeout=60)
    err = (res.stderr + res.stdout).decode("utf-8", "replace").strip()
    if res.rc == 0:
        return f"kldload {driver}: loaded"
    if KLD_EEXIST in err:
        return f"kldload {driver}: {KLD_EEXIST} (nothing to load)"
    if KLD_ENOEXEC in err:
        raise ActError(
            f"kldload {driver}: the kernel refused {driver}.ko (ENOEXEC): it does not match the running "
            "kernel (kernel and /boot/kernel from different builds?); see `dmesg | tail`"
        )
    if "Operation not permitted" in err:
        raise ActError(
            f"kldload {driver}: not permitted: run as root; with kern.securelevel > 0 modules can "
            "only be loaded at boot (use --persist and reboot)"
        )
    if "No such file or directory" in err:
        raise ActError(f"kldload {driver}: {driver}.ko not found in the module path (kern.module_path)")
    if "not found" in err and "kldload" not in err:
        raise ActError("kldload is not available on this host (not FreeBSD?)")
    raise ActError(err.splitlines()[-1] if err else f"kldload {driver} failed with exit status {res.rc}")


def verify(host: Host, driver: str) -> str:
    res = host.run(f"LC_ALL=C sysctl -n {sh_quote(f'dev.{driver}.0.%desc')}", timeout=30)
    desc = res.stdout.decode("utf-8", "replace").strip()
    if res.rc != 0 or not desc:
        raise ActError(
            f"no {driver}0 device attached (sysctl dev.{driver}.0.%desc failed): the CPU does not advertise "
            f"AES to the kernel; `dmesg | grep {driver}` shows why"
        )
    if "AES" not in desc:
        raise ActError(
            f"{driver}0 attached for {desc} only: no AES acceleration (AES-NI disabled in firmware?)"
        )
    return f"{driver}0 attached: {desc}"


# ---- performing a plan -----------------------------------------------------------------------------


@dataclass
class ActResult:
    lines: list[str] = field(default_factory=list)
    writes: list[WriteResult] = field(default_factory=list)


class ActInterrupted(Interrupted):
    """Ctrl-C/SIGTERM while performing: str() says what was put back and what state files are in."""

    def __init__(self, message: str, signame: str = "SIGINT") -> None:
        super().__init__(signame, message)


def perform(host: Host, plan: Plan, echo: Callable[[str], None] = lambda _s: None, root: str = "") -> ActResult:
    """Run the plan's actions in order on `host`; stop at the first failure (ActError).

    All the files of one run change, or none: on ANY failure (an ActError, a lost connection, Ctrl-C)
    after a file was written, the files already written are put back (`_roll_back`) and the error
    says so, or says precisely which file is in which state. An interrupt is re-raised after that as
    ActInterrupted (a KeyboardInterrupt) carrying that account.
    """
    if plan.refusal is not None:
        raise ActError(f"{plan.refusal.reason} ({plan.refusal.advice})")
    out = ActResult()

    def say(line: str) -> None:
        out.lines.append(line)
        echo(line)

    # Every file is checked before anything is done (kldload included): a permission, ownership or
    # read-only problem with any of them changes nothing.
    check_writable(host, [w.edit for w in plan.writes], root=root)

    progress = _Progress()
    try:
        with sigterm_raises():  # SIGTERM interrupts like Ctrl-C, so it rolls back too
            _perform_actions(host, plan, root, say, out, progress)
    except BaseException as exc:
        if not progress.done and progress.current is None:
            raise
        account = _account(host, progress.done, progress.current, exc, root)
        if isinstance(exc, KeyboardInterrupt):
            signame = signame_of(exc)
            said = " (SIGTERM)" if signame == "SIGTERM" else ""
            raise ActInterrupted(f"interrupted{said}: {account}", signame) from exc
        why = str(exc) if isinstance(exc, BsdcryptError) else f"{type(exc).__name__}: {exc}"
        raise ActError(f"{why}; {account}") from exc
    return out


@dataclass
class _Progress:
    done: list[tuple[FileEdit, WriteResult]] = field(default_factory=list)  # files now holding the new content
    current: FileEdit | None = None  # the file being written, while its outcome is not known


def _perform_actions(
    host: Host, plan: Plan, root: str, say: Callable[[str], None], out: ActResult, progress: _Progress
) -> None:
    done = progress.done
    for action in plan.actions:
        if isinstance(action, RunCommand):
            if action.check == "kldload":
                say(kldload(host, action.argv[1]))
            elif action.check == "verify":
                say(verify(host, action.argv[-1].split(".")[1]))
            else:
                res = host.run(" ".join(sh_quote(a) for a in action.argv), timeout=120)
                if res.rc != 0:
                    raise ActError(
                        f"{' '.join(action.argv)} failed: {res.stderr.decode('utf-8', 'replace').strip()}"
                    )
                say(f"ran {' '.join(action.argv)}")
        elif isinstance(action, WriteFile):
            progress.current = action.edit
            try:
                result = safe_write(host, action.edit, root=root)
            except WriteFailed as exc:
                if exc.renamed is not None:  # in place although the write failed: undone with the others
                    done.append((action.edit, exc.renamed))
                    progress.current = None
                elif exc.certain:
                    progress.current = None
                raise
            progress.current = None
            done.append((action.edit, result))
            out.writes.append(result)
            backup = f" (backup: {result.backup})" if result.backup else " (new file)"
            real = f" -> {result.target}" if result.target and result.target != result.path else ""
            say(f"wrote {result.path}{real}{backup}")
        elif isinstance(action, Note | Refuse):
            continue


def _account(
    host: Host, done: list[tuple[FileEdit, WriteResult]], current: FileEdit | None, exc: BaseException, root: str
) -> str:
    """Put back what this run wrote (signals deferred meanwhile) and say, in one line, what state
    every file is in: never "unchanged" unless it is."""

    with signals_deferred() as got:
        rolled = _roll_back(host, done, root) if done else ""
    parts = [rolled] if rolled else []
    if current is not None:
        how = "interrupted" if isinstance(exc, KeyboardInterrupt) else "cut off"
        parts.append(
            f"{current.path} may or may not hold the new content (its write was {how} before it reported "
            f"back): check it; if it changed, the original is the newest {current.path}.bsdcrypt-* beside "
            "it (or, for a file that did not exist, remove it)"
        )
    elif done and rolled.startswith("put back"):
        parts[-1] += ": the loader configuration is unchanged"
    if got:
        parts.append("a further interrupt waited until this was done")
    return "; ".join(parts)


def _roll_back(host: Host, done: list[tuple[FileEdit, WriteResult]], root: str) -> str:
    """Undo the writes of this run, last first: all the files of one run change, or none. One line."""
    undone: list[str] = []
    for edit, result in reversed(done):
        try:
            undo_write(host, edit, result, root=root)
        except (Exception, KeyboardInterrupt) as exc:
            left = ", ".join(
                f"{r.path} (backup: {r.backup or 'none, it was created'})"
                for e, r in done
                if e.path not in undone
            )
            put = f"put back {', '.join(reversed(undone))}; " if undone else ""
            why = str(exc) if isinstance(exc, BsdcryptError) else f"{type(exc).__name__}: {exc}"
            return f"{put}undoing the earlier changes failed too ({why}); restore by hand: {left}"
        undone.append(edit.path)
    return "put back " + ", ".join(reversed(undone)) + " as it was"
