"""A paste: what it showed, and what stays unknown because it was not pasted."""

from __future__ import annotations

from dataclasses import replace

from bsdcrypt.parse import HostFacts
from bsdcrypt.parsers.ifgroup import parse_groups
from bsdcrypt.probe import FILE_PREFIX, Evidence, File, StepName, file_step
from bsdcrypt.status import ConsumerInfo, Finding, Status

# What each pasted output decides, for the paste-partial finding (docs/analyze.md has the full table).
PASTE_PARTS = (
    (StepName.KLDSTAT_V, "kldstat -v", "whether the driver is compiled in, loaded or absent now"),
    (file_step(File.LOADER_CONF), "/boot/loader.conf (and .local, loader.conf.d)", "whether it is persisted"),
    (StepName.GELI_LIST, "geli list", "the GELI providers' crypto path now"),
    (StepName.SYSCTL_DEV, "sysctl dev.aesni", "whether aesni0 is attached now"),
)


# The kernel crypto consumers' outputs (issue 27) a paste may lack: (step, tunnel group or None, the
# command that completes it, what it decides, the consumer it decides). The commands are the ones
# `analyze` reads back (collect/paste.py) and the probe runs (probe.py, read-only).
CONSUMER_PARTS = (
    (StepName.ZFS_CRYPTO, None, "zfs get -t filesystem,volume encryption,keystatus",
     "ZFS native encryption: the encrypted datasets, their cipher and key status", "zfs"),
    (StepName.SYSCTL_IPSEC, None, "sysctl net.inet.ipsec", "whether IPsec is in the kernel", "ipsec"),
    (StepName.SETKEY_SAD, None, "setkey -D", "as root: the IPsec SAs' ciphers", "ipsec"),
    (StepName.SYSCTL_KTLS, None, "sysctl kern.ipc.tls", "kernel TLS: enabled, its sessions per cipher", "ktls"),
    (StepName.TUNNEL_GROUPS, "openvpn", "ifconfig -g openvpn", "the OpenVPN DCO interfaces", "ovpn-dco"),
    (StepName.TUNNEL_GROUPS, "wg", "ifconfig -g wg", "the WireGuard interfaces", "wireguard"),
)


def _consumer_pasted(ev: Evidence, step: str, group: str | None) -> bool:
    st = ev.step(step)
    if st is None or group is None:
        return st is not None
    return group in parse_groups(st.text)


def _consumer_instead(step: str, c: ConsumerInfo | None) -> str | None:
    """What the pasted parts told of a consumer in place of its own output (a release without if_ovpn,
    a kernel without IPsec, if_wg.ko in kldstat ...), if anything."""
    if c is None or (c.present is None and c.verdict == "unknown"):
        return None
    if c.kind == "ipsec":
        # the other IPsec output (or ipsec.ko in kldstat) told whether IPsec is in the kernel; only
        # "not in the kernel" makes the SAs moot
        if c.present is None or (step == StepName.SETKEY_SAD and c.present):
            return None
        return "IPsec is in the kernel" if c.present else "IPsec is not in the kernel"
    return c.detail


def consumer_gaps(ev: Evidence, consumers: list[ConsumerInfo]) -> str | None:
    """The sentence the paste-partial finding gains when the paste lacks consumer outputs: each command
    that would complete it, what it decides, and what the other parts told instead."""
    by_kind = {c.kind: c for c in consumers}
    lacking = []
    for step, group, command, what, kind in CONSUMER_PARTS:
        if not _consumer_pasted(ev, step, group):
            instead = _consumer_instead(step, by_kind.get(kind))
            lacking.append(f"`{command}` ({what}{'; here ' + instead if instead else ''})")
    if not lacking:
        return None
    return (" Kernel crypto consumers' outputs not pasted: " + "; ".join(lacking)
            + ": paste them too for their verdicts.")


def with_consumer_gaps(finding: Finding, ev: Evidence, consumers: list[ConsumerInfo]) -> Finding:
    """paste-partial, completed with the consumer outputs the paste lacks (the consumers are assessed
    after the other findings: assess/consumers.add_consumers calls this)."""
    gaps = consumer_gaps(ev, consumers) if finding.id == "paste-partial" else None
    return replace(finding, message=finding.message + gaps) if gaps else finding


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
        (StepName.KENV_SMBIOS, "kenv"), (StepName.ZFS_CRYPTO, "zfs get"),
        (StepName.SYSCTL_IPSEC, "sysctl net.inet.ipsec"), (StepName.SETKEY_SAD, "setkey -D"),
        (StepName.SYSCTL_KTLS, "sysctl kern.ipc.tls"), (StepName.TUNNEL_GROUPS, "ifconfig groups"),
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

