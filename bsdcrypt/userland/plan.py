"""Persist (or remove) OPENSSL_ia32cap for ONE service, as data (pure): a Plan for bsdcrypt.enable.act.

FreeBSD: `<svc>_env` in rc.conf, edited the way sysrc(8) edits (usr.sbin/bsdconfig/share/sysrc.subr
f_sysrc_set): the file holding the last assignment wins (load_rc_config reads /etc/rc.conf,
/etc/rc.conf.local, then /etc/rc.conf.d/<svc> and /usr/local/etc/rc.conf.d/<svc>); only that last
assignment is changed, its quote style and anything after the value kept; a value starting with
`$`, a backtick or a backslash is not ours to rewrite; a variable set nowhere is appended to
/etc/rc.conf as `name="value"`. The other assignments inside `_env` (space-separated, rc.subr runs
`env $_env command`) are kept: only the OPENSSL_ia32cap= word is added, replaced or removed.

Linux/systemd: a drop-in `/etc/systemd/system/<unit>.service.d/bsdcrypt-aesni.conf` with
`Environment=OPENSSL_ia32cap=...`, then `systemctl daemon-reload`. Never global: no /etc/environment,
no profile, no login.conf class.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bsdcrypt.enable.plan import Note, Plan, Refuse, RunCommand, WriteFile
from bsdcrypt.loader.conf import FileEdit

VAR = "OPENSSL_ia32cap"
RC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
UNIT_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")
DROPIN_NAME = "bsdcrypt-aesni.conf"
_VALUE_OK = re.compile(r"^0x[0-9a-f]{1,16}(?::0x[0-9a-f]{1,16}){0,9}$")


class PlanError(ValueError):
    """The edit cannot be made safely; str() is one line."""


def rc_files(service: str, root: str = "") -> list[str]:
    """The files load_rc_config reads for `service`, in order (the last assignment wins): rc.conf,
    rc.conf.local (rc_conf_files), then /etc/rc.conf.d/<svc> and /usr/local/etc/rc.conf.d/<svc>
    (libexec/rc/rc.subr load_rc_config; each of those two may also be a directory of files, which
    `rc_conf_d_dirs` names for the caller to list)."""
    r = root.rstrip("/")
    return [f"{r}/etc/rc.conf", f"{r}/etc/rc.conf.local", f"{r}/etc/rc.conf.d/{service}",
            f"{r}/usr/local/etc/rc.conf.d/{service}"]


def rc_conf_d_dirs(service: str, root: str = "") -> list[str]:
    return rc_files(service, root)[2:]


def dropin_path(unit: str, root: str = "") -> str:
    return f"{root.rstrip('/')}/etc/systemd/system/{unit}.service.d/{DROPIN_NAME}"


def check_service(service: str, system: str) -> str:
    """The service name as rc.subr or systemd spells it; PlanError for anything else."""
    if system == "rc":
        if not RC_NAME.match(service):
            raise PlanError(f"{service!r} is not an rc.d service name (letters, digits, _)")
        return service
    unit = service.removesuffix(".service")
    if not UNIT_NAME.match(unit) or unit.startswith(("-", ".")) or ".." in unit:
        raise PlanError(f"{service!r} is not a systemd unit name")
    return unit


def check_value(value: str) -> None:
    if not _VALUE_OK.match(value) or value.startswith(("+", "-")):
        raise PlanError(f"{value!r} is not an OPENSSL_ia32cap value bsdcrypt writes")


@dataclass(frozen=True)
class RcAssignment:
    path: str
    index: int  # 0-based line index
    prefix: str  # up to and including `name=`
    quote: str  # '"', "'" or "" (bare)
    value: str
    rest: str  # after the value (a comment, `; other=...`), kept as is
    eol: str


_ASSIGN = r"^([ \t]*{name}=)(.*?)(\r?\n?)$"


def _parse_value(raw: str) -> tuple[str, str, str] | None:
    """(quote, value, rest) of what follows `name=`, as f_sysrc_set's awk reads it; None if not ours."""
    if raw[:1] in ("$", "`", "\\"):
        return None
    if raw[:1] in ('"', "'"):
        q = raw[0]
        end = raw.find(q, 1)
        if end < 0:
            return None  # the value goes on past this line
        value = raw[1:end]
        if q == '"' and any(c in value for c in '$`\\'):
            return None
        return q, value, raw[end + 1:]
    m = re.match(r"^([^\s;]*)(.*)$", raw, re.S)
    assert m is not None
    if any(c in m.group(1) for c in "'\"$`\\"):
        return None
    return "", m.group(1), m.group(2)


def find_last(files: Sequence[tuple[str, bytes]], name: str) -> RcAssignment | None:
    """The assignment of `name` that wins (last line of the last file that sets it). PlanError when
    that assignment is one bsdcrypt cannot rewrite safely."""
    pattern = re.compile(_ASSIGN.format(name=re.escape(name)))
    found: RcAssignment | None = None
    for path, data in files:
        lines = data.decode("utf-8", "surrogateescape").splitlines(keepends=True)
        for i, line in enumerate(lines):
            m = pattern.match(line)
            if not m:
                continue
            parsed = _parse_value(m.group(2))
            if parsed is None:
                found = RcAssignment(path, i, m.group(1), "?", m.group(2), "", m.group(3))
                continue
            q, value, rest = parsed
            found = RcAssignment(path, i, m.group(1), q, value, rest, m.group(3))
    if found is not None and found.quote == "?":
        raise PlanError(
            f"{found.path}:{found.index + 1}: {name} is set with an expansion or a quote bsdcrypt does not "
            "rewrite (like sysrc(8)); edit it by hand"
        )
    return found


def merge_env(current: str, value: str | None) -> str:
    """`current` (`_env`: space-separated NAME=VALUE words) with OPENSSL_ia32cap set to `value`, or
    removed when `value` is None; the other words kept in order."""
    words = [w for w in current.split() if not w.startswith(VAR + "=")]
    if value is not None:
        words.append(f"{VAR}={value}")
    return " ".join(words)


def rc_edit(files: Sequence[tuple[str, bytes]], service: str, value: str | None, root: str = "") -> FileEdit | None:
    """The one FileEdit that sets (value) or removes (None) OPENSSL_ia32cap in `<svc>_env`; None when
    nothing changes. `files`: rc_files(service, root) that exist, with their content."""
    name = f"{service}_env"
    last = find_last(files, name)
    content = dict(files)
    if last is None:
        if value is None:
            return None
        target = rc_files(service, root)[0]
        before = content.get(target, b"")
        sep = b"" if not before or before.endswith(b"\n") else b"\n"
        after = before + sep + f'{name}="{VAR}={value}"\n'.encode()
        return FileEdit(target, before, after, existed=target in content)
    merged = merge_env(last.value, value)
    if merged == last.value:
        return None
    before = content[last.path]
    lines = before.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    if merged:
        q = last.quote or '"'
        lines[last.index] = f"{last.prefix}{q}{merged}{q}{last.rest}{last.eol or chr(10)}"
    else:
        del lines[last.index]  # like sysrc -x: an empty <svc>_env goes away
    after = "".join(lines).encode("utf-8", "surrogateescape")
    return FileEdit(last.path, before, after)


REMOVED = b"# bsdcrypt userland --remove took OPENSSL_ia32cap out of this drop-in; the file may be deleted.\n"


def dropin_content(value: str, vector: str, unit: str) -> bytes:
    return (
        "# Written by bsdcrypt userland: OpenSSL uses AES-NI although the hypervisor hides the aes flag.\n"
        f"# Derived from the vector OpenSSL detected here: {vector} (AES-NI and PCLMULQDQ added).\n"
        f"# Roll back: remove this file, systemctl daemon-reload, systemctl restart {unit}.\n"
        "[Service]\n"
        f"Environment={VAR}={value}\n"
    ).encode()


def plan_apply(
    system: str,
    service: str,
    value: str | None,
    files: Sequence[tuple[str, bytes]],
    *,
    vector: str = "",
    root: str = "",
    is_root: bool | None = None,
) -> Plan:
    """Set (value) or remove (None) the service's override. `files`: what exists of rc_files() (rc) or
    the drop-in (systemd). A Plan with one WriteFile, the reload, and notes; or a Refuse."""
    plan = Plan()
    try:
        unit = check_service(service, system)
        if value is not None:
            check_value(value)
        if system == "rc":
            edit = rc_edit(files, unit, value, root)
        else:
            path = dropin_path(unit, root)
            content = dict(files)
            before = content.get(path)
            if value is None:
                after = None if before is None else REMOVED
            else:
                after = dropin_content(value, vector, unit)
            changed = after is not None and after != before
            edit = FileEdit(path, before or b"", after, before is not None) if changed and after else None
    except PlanError as exc:
        plan.actions.append(Refuse(str(exc), "set it by hand (docs/userland.md shows the line)"))
        return plan
    if edit is None:
        plan.actions.append(Note("nothing to change: " + ("the service already has this value" if value else
                                                          "the service has no OPENSSL_ia32cap")))
        return plan
    if is_root is False:
        plan.actions.append(Refuse("writing " + edit.path + " needs root", "run it as root (or with doas/sudo)",
                                   needs_root=True))
    why = (f"{'set' if value else 'remove'} {VAR} for {unit} only"
           + ("" if system == "rc" else " (systemd drop-in)"))
    plan.actions.append(WriteFile(edit, why))
    if system == "systemd" and not root:
        plan.actions.append(RunCommand(("systemctl", "daemon-reload"), "systemd rereads the unit's drop-ins"))
    restart = f"service {unit} restart" if system == "rc" else f"systemctl restart {unit}"
    plan.actions.append(Note(f"the running {unit} keeps its old environment until `{restart}`"))
    return plan
