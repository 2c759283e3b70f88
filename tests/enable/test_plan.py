"""The enable/disable decision table, one situation per test row."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bsdcrypt.enable.plan import PlanInput, Refuse, plan_disable, plan_enable
from bsdcrypt.loader.conf import apply, set_yes

CONF = "/boot/loader.conf"
FILES = [(CONF, b'zfs_load="YES"\n')]

BASE = PlanInput(
    driver="aesni",
    state="not-loaded",
    cpu_aes=True,
    vm=False,
    variant="freebsd",
    arch="amd64",
    is_root=True,
    persisted=False,
)

# (name, input, persist, expected plan kinds, text that must appear in the refusal/notes)
TABLE: list[tuple[str, PlanInput, bool, list[str], str]] = [
    (
        "12.x not loaded, now only",
        BASE,
        False,
        ["run:kldload aesni", "run:sysctl -n dev.aesni.0.%desc", "note"],
        "--persist",
    ),
    (
        "12.x not loaded, persist",
        BASE,
        True,
        ["run:kldload aesni", "run:sysctl -n dev.aesni.0.%desc", f"write:{CONF}"],
        "",
    ),
    (
        "13+ GENERIC builtin",
        replace(BASE, state="builtin", attached=True, accelerates_aes=True, kernel_ident="GENERIC"),
        True,
        ["note"],
        "GENERIC includes aesni since FreeBSD 13.0",
    ),
    (
        "HardenedBSD builtin",
        replace(BASE, state="builtin", attached=True, accelerates_aes=True, variant="hardenedbsd", kernel_ident="HARDENEDBSD"),
        False,
        ["note"],
        "HardenedBSD",
    ),
    (
        "loaded, not persisted, persist",
        replace(BASE, state="loaded", attached=True, accelerates_aes=True),
        True,
        ["note", f"write:{CONF}"],
        "",
    ),
    ("bare metal without AES-NI", replace(BASE, cpu_aes=False), True, ["refuse"], "no AES instructions"),
    (
        "VM hiding the flag",
        replace(BASE, cpu_aes=False, vm=True, hypervisor="KVM"),
        True,
        ["refuse"],
        "passthrough",
    ),
    (
        "SHA-only attach",
        replace(BASE, state="no-device", attached=True, accelerates_aes=False),
        True,
        ["refuse"],
        "firmware",
    ),
    (
        "no device despite AES-NI",
        replace(BASE, state="no-device", attached=False),
        True,
        ["refuse"],
        "hint.aesni.0.disabled",
    ),
    ("module missing", replace(BASE, state="missing"), True, ["refuse"], "device aesni"),
    ("unknown state", replace(BASE, state="unknown"), True, ["refuse"], "kldstat"),
    ("pfSense", replace(BASE, variant="pfsense"), True, ["refuse"], "Cryptographic"),
    ("OPNsense not builtin", replace(BASE, variant="opnsense"), True, ["refuse"], "OPNsense"),
    ("TrueNAS", replace(BASE, variant="truenas"), True, ["refuse"], "Tunables"),
    (
        "OPNsense on HBSD builtin",
        replace(BASE, variant="opnsense", state="builtin", attached=True, accelerates_aes=True),
        True,
        ["note"],
        "compiled into",
    ),
    (
        "arm64 armv8crypto",
        replace(BASE, driver="armv8crypto", arch="aarch64"),
        True,
        ["run:kldload armv8crypto", "run:sysctl -n dev.armv8crypto.0.%desc", f"write:{CONF}"],
        "",
    ),
    ("no driver for the arch", replace(BASE, driver=None, arch="powerpc64"), True, ["refuse"], "ChaCha20"),
    (
        "not root",
        replace(BASE, is_root=False),
        False,
        ["refuse", "run:kldload aesni", "run:sysctl -n dev.aesni.0.%desc", "note"],
        "root",
    ),
    ("Linux", replace(BASE, os_name="Linux", variant="debian"), True, ["refuse"], "not a FreeBSD"),
    (
        "GELI on software",
        replace(BASE, geli_software=("ada0p4.eli",)),
        False,
        ["run:kldload aesni", "run:sysctl -n dev.aesni.0.%desc", "note", "note"],
        "ada0p4.eli",
    ),
]


@pytest.mark.parametrize(("name", "inp", "persist", "kinds", "text"), TABLE, ids=[t[0] for t in TABLE])
def test_decision_table(name: str, inp: PlanInput, persist: bool, kinds: list[str], text: str) -> None:
    plan = plan_enable(inp, FILES, persist=persist)
    assert plan.kinds() == kinds
    words = " ".join(plan.notes)
    if plan.refusal:
        words += " " + plan.refusal.reason + " " + plan.refusal.advice
    assert text in words


def test_builtin_never_writes_aesni_load() -> None:
    inp = replace(BASE, state="builtin", attached=True, accelerates_aes=True)
    assert not plan_enable(inp, [(CONF, b"")], persist=True).writes


def test_persist_already_effective_is_noop() -> None:
    inp = replace(BASE, state="loaded", attached=True, accelerates_aes=True, persisted=True)
    plan = plan_enable(inp, [(CONF, b'aesni_load="YES"\n')], persist=True)
    assert not plan.changes_something and "already in effect" in " ".join(plan.notes)


def test_root_only_edits_files() -> None:
    plan = plan_enable(BASE, [("/j/boot/loader.conf", b"")], persist=True, root="/j")
    assert plan.kinds() == ["note", "note", "write:/j/boot/loader.conf"]  # the release at /j is unknown
    old = replace(BASE, root_release="12.4-RELEASE-p9")
    assert plan_enable(old, [("/j/boot/loader.conf", b"")], persist=True, root="/j").kinds() == [
        "note",
        "write:/j/boot/loader.conf",
    ]
    new = replace(BASE, root_release="14.1-RELEASE")
    builtin = plan_enable(new, [("/j/boot/loader.conf", b"")], persist=True, root="/j")
    assert builtin.kinds() == ["note", "note"] and not builtin.changes_something  # a no-op, not a refusal
    assert "GENERIC has aesni compiled in since 13.0" in builtin.notes[1] and "--force" in builtin.notes[1]
    forced = plan_enable(new, [("/j/boot/loader.conf", b"")], persist=True, root="/j", force=True)
    assert forced.kinds() == ["note", "write:/j/boot/loader.conf"]
    assert isinstance(plan_enable(BASE, [], root="/j").refusal, Refuse)


def test_disable_undoes_enable() -> None:
    files = [(CONF, b'aesni_load="NO"\n')]
    enabled = apply(files, set_yes(files))
    plan = plan_disable(enabled)
    assert [w.edit.after for w in plan.writes] == [b'aesni_load="NO"\n']
    assert "nothing to undo" in " ".join(plan_disable(files).notes)


def test_disable_names_kldunload_only_for_a_running_system() -> None:
    """The last note of disable: on this host or --host the driver stays loaded until the next boot (and
    kldunload would unload it now); a tree under --root is not the kernel running here."""
    files = [(CONF, b'aesni_load="NO"\n')]
    enabled = apply(files, set_yes(files))
    live, tree = plan_disable(enabled).notes[-1], plan_disable(enabled, live=False).notes[-1]
    assert "kldunload aesni" in live and "stays loaded" in live
    assert "kldunload" not in tree and "Nothing here touches a running kernel" in tree
    assert live.startswith('after the next boot: aesni_load="NO"') and tree.startswith(live.split(". ")[0])
