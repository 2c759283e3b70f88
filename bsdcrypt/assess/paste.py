"""A paste: what it showed, and what stays unknown because it was not pasted."""

from __future__ import annotations

from bsdcrypt.parse import HostFacts
from bsdcrypt.probe import FILE_PREFIX, File, StepName, file_step
from bsdcrypt.status import Finding, Status

# What each pasted output decides, for the paste-partial finding (docs/analyze.md has the full table).
PASTE_PARTS = (
    (StepName.KLDSTAT_V, "kldstat -v", "whether the driver is compiled in, loaded or absent now"),
    (file_step(File.LOADER_CONF), "/boot/loader.conf (and .local, loader.conf.d)", "whether it is persisted"),
    (StepName.GELI_LIST, "geli list", "the GELI providers' crypto path now"),
    (StepName.SYSCTL_DEV, "sysctl dev.aesni", "whether aesni0 is attached now"),
)


def _told_instead(step: str, status: Status) -> str | None:
    """What the other parts of a paste decided in place of a part that was not pasted, if anything."""
    d, p = status.driver, status.persist
    if step == StepName.KLDSTAT_V and d.name and d.state != "unknown":
        return f"{d.name} {d.state}, told from dmesg.boot"
    if step == file_step(File.LOADER_CONF) and p.configured is not None:
        return "compiled in, told from dmesg.boot" if p.source in (None, "kernel") else f"told from {p.source}"
    if step == StepName.GELI_LIST and status.geli:
        return "the providers attached at boot, from dmesg.boot"
    if step == StepName.SYSCTL_DEV and d.attached is not None:
        return "as at boot, from dmesg.boot"
    return None


def paste_finding(f: HostFacts, status: Status) -> Finding:
    seen = [label for step, label in (
        (file_step(File.DMESG_BOOT), "dmesg"), (StepName.DMESG_FILTERED, "filtered dmesg"),
        (StepName.KLDSTAT_V, "kldstat"), (StepName.KLDSTAT_FILTERED, "filtered kldstat"),
        (StepName.UNAME_A, "uname -a"), (StepName.GELI_LIST, "geli list"), (StepName.SYSCTL, "sysctl"),
        (StepName.KENV_SMBIOS, "kenv"),
    ) if step in f.shown] + sorted(k[len(FILE_PREFIX):] for k in f.shown if k.startswith(file_step("/boot/")))
    lacking = []
    for step, label, what in PASTE_PARTS:
        if step not in f.shown:
            instead = _told_instead(step, status)
            lacking.append(f"{label} ({what}{'; here ' + instead if instead else ''})")
    message = f"Assessed from a paste of {', '.join(seen)}"
    message += f"; not pasted: {'; '.join(lacking)}: what only they show stays unknown." if lacking else "."
    return Finding(
        "paste-partial",
        "info",  # what stays unknown carries its own unknown finding (driver-unknown, persist-unknown)
        message,
        "For a full report run `bsdcrypt status` on the host, or `sh probe.sh` from `bsdcrypt probe-script` "
        "and `bsdcrypt analyze` its output.",
    )

