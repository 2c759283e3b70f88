"""The enable/disable planner (pure): a Status and the loader files in, a Plan of actions as data out.

Nothing here runs commands.  `bsdcrypt.enable.act` performs a Plan on a Host.  The decision table is
documented in docs/enable.md.  `enable.merge.merge_same_files` makes one write per real file when two
names of the loader configuration are one file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bsdcrypt.assess.findings import PASSTHROUGH, VARIANT_NAMES
from bsdcrypt.loader import conf as loaderconf
from bsdcrypt.loader.conf import FileEdit
from bsdcrypt.parsers.loaderconf import assignments, malformed
from bsdcrypt.parsers.version import parse_release
from bsdcrypt.platform import AES_DRIVERS, APPLIANCES, ARM64, FREEBSD_FAMILY, primary_driver
from bsdcrypt.status import DriverState, Status


def _name(variant: str) -> str:
    return VARIANT_NAMES.get(variant, variant)


CHACHA_FAST = (
    "ChaCha20-Poly1305 is the fast cipher here: prefer it where the protocol allows "
    "(IPsec, TLS/KTLS, SSH, WireGuard)."
)
CHACHA_NOTE = (
    "Meanwhile ChaCha20-Poly1305 is the fast cipher here: prefer it where the protocol allows "
    "(IPsec, TLS/KTLS, SSH, WireGuard)."
)


@dataclass(frozen=True)
class PlanInput:
    """The narrow view of a host the planner needs (build it with `from_status`)."""

    driver: str | None  # aesni, armv8crypto; None when the architecture has no AES driver
    state: DriverState  # builtin | loaded | not-loaded | no-device | missing | unknown
    attached: bool | None = None
    accelerates_aes: bool | None = None
    cpu_aes: bool | None = None  # AESNI in Features2 (AES in ISA0 on arm64)
    vm: bool | None = None
    hypervisor: str | None = None
    variant: str = "freebsd"  # freebsd, hardenedbsd, pfsense, opnsense, truenas, freenas, ghostbsd, ...
    os_name: str | None = "FreeBSD"
    arch: str | None = None
    is_root: bool | None = None
    persisted: bool | None = None  # compiled in, or an effective <driver>_load="YES"
    geli_software: tuple[str, ...] = ()  # AES GELI providers on software crypto
    kernel_ident: str | None = None  # GENERIC, HARDENEDBSD, TRUENAS, a custom config name
    root_release: str | None = None  # with --root: the userland release of the system at DIR
    root_variant: str | None = None  # with --root: the product at DIR (pfsense, opnsense, ...), from its files
    root_not_freebsd: str | None = None  # with --root: why DIR is not a FreeBSD-family system, if it is not
    root_arch: str | None = None  # with --root: the architecture of DIR's kernel, if it has one
    major: int | None = None  # the release's major number: which loader generations read the files
    blacklisted: str | None = None  # FILE:LINE of a module_blacklist that names the driver

    @classmethod
    def from_status(cls, s: Status) -> PlanInput:
        geli = tuple(g.name for g in s.geli if g.accelerated is False and g.accelerable)
        return cls(
            driver=s.driver.name,
            state=s.driver.state,
            attached=s.driver.attached,
            accelerates_aes=s.driver.accelerates_aes,
            cpu_aes=s.cpu.aesni,
            vm=s.cpu.vm,
            hypervisor=s.cpu.hypervisor,
            variant=s.os.variant,
            os_name=s.os.name,
            arch=s.os.arch,
            is_root=s.root,
            persisted=None if s.persist.inferred else s.persist.configured,  # inferred is not seen: plan as before
            geli_software=geli,
            kernel_ident=s.os.kernel_ident,
            major=s.os.major,
            blacklisted=s.persist.blacklisted,
        )


@dataclass(frozen=True)
class RunCommand:
    argv: tuple[str, ...]
    why: str
    check: str = "rc"  # "rc": must exit 0; "kldload": exit status translated; "verify": output checked


@dataclass(frozen=True)
class WriteFile:
    edit: FileEdit
    why: str


@dataclass(frozen=True)
class Refuse:
    reason: str
    advice: str
    needs_root: bool = False  # the plan is right, only the user is not root (a dry run still shows it)


@dataclass(frozen=True)
class Note:
    text: str


Action = RunCommand | WriteFile | Refuse | Note


@dataclass
class Plan:
    actions: list[Action] = field(default_factory=list)

    @property
    def refusal(self) -> Refuse | None:
        return next((a for a in self.actions if isinstance(a, Refuse)), None)

    @property
    def commands(self) -> list[RunCommand]:
        return [a for a in self.actions if isinstance(a, RunCommand)]

    @property
    def writes(self) -> list[WriteFile]:
        return [a for a in self.actions if isinstance(a, WriteFile)]

    @property
    def notes(self) -> list[str]:
        return [a.text for a in self.actions if isinstance(a, Note)]

    @property
    def changes_something(self) -> bool:
        return self.refusal is None and bool(self.commands or self.writes)

    def kinds(self) -> list[str]:
        """A compact summary for tests and logs, e.g. ['run:kldload aesni', 'write:/boot/loader.conf']."""
        out: list[str] = []
        for a in self.actions:
            if isinstance(a, RunCommand):
                out.append("run:" + " ".join(a.argv))
            elif isinstance(a, WriteFile):
                out.append("write:" + a.edit.path)
            elif isinstance(a, Refuse):
                out.append("refuse")
            else:
                out.append("note")
        return out


def _appliance_advice(variant: str) -> str:
    from bsdcrypt.assess.findings import APPLIANCE_SETTING

    return APPLIANCE_SETTING.get(variant, "use the appliance's own settings page")


def _geli_note(p: PlanInput, driver: str) -> Note | None:
    if not p.geli_software:
        return None
    names = ", ".join(p.geli_software)
    return Note(
        f"GELI provider(s) {names} were attached before {driver} and keep using software crypto: "
        "re-attach each one (geli detach NAME && geli attach ... NAME) or reboot (root, swap and busy "
        "providers: reboot)."
    )


def blacklist_refusal(files: Sequence[tuple[str, bytes]], driver: str, major: int | None, root: str) -> Refuse | None:
    """A refusal when `module_blacklist` names the driver in some way the loader may read it: the lua
    loader then skips `<driver>_load="YES"` (config.lua `loadModule`). bsdcrypt does not edit a
    blacklist: someone put the driver there on purpose."""
    from bsdcrypt.loader.model import outcomes

    hits = [o.blacklist for o in outcomes(files, driver, major, root) if o.blacklist is not None]
    if not hits:
        return None
    where = f"{hits[0].path}:{hits[0].line}"
    return Refuse(
        f'module_blacklist at {where} names {driver}, so the loader skips {driver}_load="YES" at boot '
        "whatever it says",
        f"if {driver} was blacklisted by mistake, remove it from module_blacklist at {where} and run "
        f"bsdcrypt enable --persist again (until then `kldload {driver}` still works, for this boot only)",
    )


def _order_note(files: Sequence[tuple[str, bytes]], name: str, edits: Sequence[FileEdit]) -> Note | None:
    """Say so when loader.conf.d files assign `name`: the loader reads them in directory order."""
    from bsdcrypt.loader.model import conf_dir_entry

    in_dirs = [
        a
        for path, data in files
        if "/loader.conf.d/" in path and conf_dir_entry(path.rsplit("/", 1)[-1])
        for a in assignments(path, data)
        if a.name == name
    ]
    if len({a.path for a in in_dirs}) < 2:
        return None
    where = ", ".join(f"{a.path}:{a.line}" for a in in_dirs[:5])
    changed = "; bsdcrypt makes every one it may read last YES" if edits else ""
    return Note(
        f"{name} is set in several loader.conf.d files ({where}): the loader reads that directory in "
        f"directory order, not by name, so no one of them is sure to be read last{changed}."
    )


def _persist_actions(
    files: Sequence[tuple[str, bytes]], driver: str, root: str, major: int | None = None
) -> list[Action]:
    name = f"{driver}_load"
    out: list[Action] = []
    refusal = blacklist_refusal(files, driver, major, root)
    if refusal is not None:
        return [refusal]
    bad = [(path, n) for path, data in files for n in malformed(data)]
    if bad:
        where = ", ".join(f"{path}:{n}" for path, n in bad[:5])
        out.append(
            Note(
                f"malformed line(s) at {where}: the lua loader skips them; the old Forth loader stops "
                "reading the file there. bsdcrypt leaves them as they are."
            )
        )
    damaged = loaderconf.damaged_markers(files, name)
    if damaged:
        path, number, tag = damaged[0]
        out.append(
            Note(
                f"{path}:{number} carries a damaged bsdcrypt marker (`{tag}`): `disable --persist` cannot "
                "undo that line."
            )
        )
    edits = loaderconf.set_yes(files, name, root=root, major=major)
    note = _order_note(files, name, edits)
    if note is not None:
        out.append(note)
    if not edits:
        eff = loaderconf.effective(files, name)
        where = f" ({eff.path}:{eff.line})" if eff else ""
        out.append(Note(f'{name}="YES" is already in effect{where}: nothing to change.'))
        return out
    for e in edits:
        verb = "create" if not e.existed else "edit"
        out.append(WriteFile(e, f'{verb} {e.path} so that {name}="YES" is in effect at the next boot'))
    return out


def loader_driver(p: PlanInput) -> str:
    """The FreeBSD driver whose `<driver>_load` line to manage (also when the probe ran elsewhere, --root)."""
    if p.driver in AES_DRIVERS:
        return p.driver
    return "armv8crypto" if p.arch in ARM64 else "aesni"


def plan_enable(
    p: PlanInput,
    files: Sequence[tuple[str, bytes]] = (),
    *,
    persist: bool = False,
    root: str = "",
    force: bool = False,
) -> Plan:
    """What `bsdcrypt enable [--persist] [--root DIR [--force]]` should do on this host: the first rule
    that decides the whole plan (a refusal, nothing to do), else load now and persist (docs/enable.md)."""
    if root:
        return Plan(_root_plan(p, files, root, persist=persist, force=force))
    for rule in (_not_freebsd, _compiled_in, _cannot_accelerate, _appliance, _driver_refusal):
        decided = rule(p, persist)
        if decided is not None:
            return Plan(decided)
    driver = p.driver or loader_driver(p)
    act = _load_now(p, driver)
    act += _persist_or_say(p, files, driver, root, persist, refused=any(isinstance(a, Refuse) for a in act))
    geli = _geli_note(p, driver)
    return Plan(act + ([geli] if geli else []))


def _root_plan(
    p: PlanInput, files: Sequence[tuple[str, bytes]], root: str, *, persist: bool, force: bool
) -> list[Action]:
    """--root DIR: an offline system (jail, image), only its loader configuration is edited."""
    act: list[Action] = [
        Note(
            f"--root {root}: only the loader configuration under it is edited; the running kernel "
            "is not touched and its driver state is not checked against that system's kernel."
        )
    ]
    refusal = _root_refusal(p, root, persist)
    if refusal is not None:
        return act + [refusal]
    drv = loader_driver(p)
    rel = parse_release(p.root_release) if p.root_release else None
    if rel is not None and (rel.major >= 13 or rel.hbsd) and not force:
        # Like a running kernel with the driver compiled in: nothing to do, and say why (exit 0).
        kernel = "HARDENEDBSD has" if rel.hbsd else "GENERIC has"
        since = "10" if rel.hbsd else "13.0"
        return act + [
            Note(
                f"the system at {root} is {rel.raw}: its {kernel} {drv} compiled in since {since}, so no "
                f"{drv}_load line is needed and nothing changes. If it boots a custom kernel without "
                f"`device {drv}`, --force writes the line anyway."
            )
        ]
    if rel is None:
        unknown = f"the release of the system at {root} is unknown"
        act.append(Note(f"{unknown} ({root}/bin/freebsd-version missing or unparsable)."))
    return act + _persist_actions(files, drv, root, rel.major if rel else None)


def _root_refusal(p: PlanInput, root: str, persist: bool) -> Refuse | None:
    if p.root_not_freebsd:  # what a running non-FreeBSD host gets, with what DIR showed
        return Refuse(
            f"the system at {root} is not a FreeBSD-family system: {p.root_not_freebsd}",
            "point --root at the root of a FreeBSD or HardenedBSD system (mounted?)",
        )
    if p.root_arch is not None and primary_driver(p.root_arch) is None:  # DIR's kernel: no AES driver
        return Refuse(f"FreeBSD has no AES acceleration driver for {p.root_arch}", CHACHA_NOTE)
    if not persist:
        return Refuse("with --root there is nothing to do without --persist", "add --persist")
    if p.root_variant in APPLIANCES:  # told by DIR's own version files, as the probe tells a running host
        return Refuse(
            f"the system at {root} is {_name(p.root_variant)}, which generates /boot/loader.conf "
            "itself; bsdcrypt does not edit it",
            _appliance_advice(p.root_variant),
        )
    return None


# The rules that decide a whole plan for a running host, in order: each returns the plan's actions, or
# None to let the next one decide.


def _not_freebsd(p: PlanInput, persist: bool) -> list[Action] | None:
    if p.os_name not in FREEBSD_FAMILY and p.variant not in APPLIANCES + ("hardenedbsd",):
        return [
            Refuse(
                f"this is not a FreeBSD-family host ({p.os_name or 'unknown system'})",
                "run bsdcrypt enable on a FreeBSD or HardenedBSD host",
            )
        ]
    if p.driver is None:
        return [Refuse(f"FreeBSD has no AES acceleration driver for {p.arch or 'this architecture'}", CHACHA_NOTE)]
    return None


def _sha_only(p: PlanInput) -> bool:
    return bool(p.attached and p.accelerates_aes is False)


def _compiled_in(p: PlanInput, persist: bool) -> list[Action] | None:
    driver = p.driver
    if not (p.state == "builtin" and p.attached and not _sha_only(p)) or driver is None:
        return None
    why = f"it is compiled into the running kernel ({p.kernel_ident or 'unknown config'})"
    if p.kernel_ident == "HARDENEDBSD":
        why += "; HardenedBSD's kernel has included aesni since 10-STABLE"
    elif p.kernel_ident == "GENERIC":
        why += f"; GENERIC includes {driver} since FreeBSD 13.0"
    act: list[Action] = [
        Note(
            f"{driver} is already active: {why}. Nothing to load, and no {driver}_load line is "
            "needed" + (", so --persist changes nothing." if persist else ".")
        )
    ]
    geli = _geli_note(p, driver)
    return act + ([geli] if geli else [])


def _cannot_accelerate(p: PlanInput, persist: bool) -> list[Action] | None:
    """The CPU (or the VM's virtual CPU) has no AES instructions: nothing to load."""
    driver = p.driver
    if _sha_only(p):
        return [
            Refuse(
                f"{driver}0 attached for SHA only: the CPU reports no AES-NI (usually disabled in the "
                "BIOS/UEFI setup)",
                "enable AES-NI in the firmware setup and reboot. " + CHACHA_NOTE,
            )
        ]
    if p.cpu_aes is not False:
        return None
    if p.vm:
        hv = p.hypervisor or "hypervisor"
        return [
            Refuse(
                f"this {hv} guest's virtual CPU does not advertise AES-NI, so {driver} cannot accelerate "
                "anything here",
                "ask the VM's provider for CPU passthrough of AES-NI ("
                + PASSTHROUGH.get(hv, "CPU passthrough / the host CPU model")
                + "). "
                + CHACHA_NOTE,
            )
        ]
    return [
        Refuse(
            "this CPU has no AES instructions: there is nothing to load",
            CHACHA_FAST + " For fast disk encryption: newer hardware.",
        )
    ]


def _appliance(p: PlanInput, persist: bool) -> list[Action] | None:
    """pfSense/OPNsense and friends generate /boot/loader.conf themselves."""
    if p.variant not in APPLIANCES:
        return None
    if p.state == "loaded" and p.attached:
        act: list[Action] = [Note(f"{p.driver} is already loaded and attached.")]
        if not p.persisted:
            act.append(
                Note(
                    f"to keep it after a reboot use the appliance's own setting ({_name(p.variant)} generates "
                    f"/boot/loader.conf itself): {_appliance_advice(p.variant)}"
                )
            )
        return act
    return [
        Refuse(
            f"{_name(p.variant)} generates /boot/loader.conf itself; bsdcrypt does not edit it",
            _appliance_advice(p.variant),
        )
    ]


def _driver_refusal(p: PlanInput, persist: bool) -> list[Action] | None:
    """No driver to load: missing, in the kernel without a device, or not known."""
    driver = p.driver
    if p.state == "missing":
        return [
            Refuse(
                f"there is no {driver} driver: it is not in the running kernel and {driver}.ko is "
                "not in /boot/kernel",
                f"add `device crypto` and `device {driver}` to the kernel config and rebuild, or "
                f"build the module (cd /usr/src/sys/modules/{driver} && make && make install)",
            )
        ]
    if p.state == "no-device":
        return [
            Refuse(
                f"{driver} is in the kernel but no {driver}0 device attached",
                f"check `dmesg | grep {driver}` and that hint.{driver}.0.disabled is not set",
            )
        ]
    if p.state == "unknown":
        return [
            Refuse(
                f"could not tell whether {driver} is loaded (kldstat output missing)",
                "run `bsdcrypt status` and check the probe; or `kldstat -v` on the host",
            )
        ]
    return None


def _load_now(p: PlanInput, driver: str) -> list[Action]:
    """kldload and its check when the module is on disk but not loaded."""
    act: list[Action] = []
    if p.cpu_aes is None and p.state == "not-loaded":
        act.append(Note("the CPU flags were not found in dmesg.boot: loading the driver will tell"))
    if p.state == "not-loaded":
        if p.is_root is False:
            act.append(
                Refuse(
                    "loading a kernel module needs root",
                    "run it as root, e.g. `doas bsdcrypt enable` or `sudo bsdcrypt enable`",
                    needs_root=True,
                )
            )
        act.append(RunCommand(("kldload", driver), f"load the {driver} driver now", check="kldload"))
        act.append(
            RunCommand(
                ("sysctl", "-n", f"dev.{driver}.0.%desc"),
                f"check that an {driver}0 device attached and accelerates AES",
                check="verify",
            )
        )
    elif p.state == "loaded":
        act.append(Note(f"{driver} is already loaded and attached."))
    return act


def _persist_or_say(
    p: PlanInput, files: Sequence[tuple[str, bytes]], driver: str, root: str, persist: bool, *, refused: bool
) -> list[Action]:
    """--persist: the loader file edits (root needed to write them); without it, what a reboot would do."""
    if persist:
        persisting = _persist_actions(files, driver, root, p.major)
        writes = any(isinstance(a, WriteFile) for a in persisting)
        if writes and p.is_root is False and not refused:
            return [Refuse("editing /boot/loader.conf needs root", "run it as root (doas/sudo)", needs_root=True),
                    *persisting]
        return persisting
    if p.blacklisted:
        return [
            Note(
                f"module_blacklist at {p.blacklisted} names {driver}: the loader skips it at boot, so it is "
                f"loaded for this boot only (remove it from the blacklist before --persist)."
            )
        ]
    if p.persisted is False:
        return [Note(f"nothing loads {driver} at boot yet: add --persist to keep it after a reboot.")]
    return []


def plan_disable(
    files: Sequence[tuple[str, bytes]], driver: str = "aesni", *, is_root: bool | None = None, live: bool = True
) -> Plan:
    """What `bsdcrypt disable --persist` should do: undo exactly what enable recorded in its markers.
    `live`: the files are those of a running system (this host or --host), not of a tree under --root."""
    plan = Plan()
    name = f"{driver}_load"
    damaged = loaderconf.damaged_markers(files, name)
    if damaged:
        path, number, tag = damaged[0]
        more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
        plan.actions.append(
            Refuse(
                f"{path}:{number}{more}: bsdcrypt's marker `{tag}` is damaged, so the value {name} had "
                "before enable is unknown",
                f"edit that line by hand: set the {name} value you want and remove the "
                "`# bsdcrypt enable: ...` comment; nothing was changed",
            )
        )
        return plan
    edits = loaderconf.restore(files, name)
    if not edits:
        plan.actions.append(
            Note(
                f"no {name} line carries bsdcrypt's marker: enable changed nothing here, so "
                "there is nothing to undo."
            )
        )
        return plan
    if is_root is False:
        plan.actions.append(
            Refuse("editing /boot/loader.conf needs root", "run it as root (doas/sudo)", needs_root=True)
        )
    for e in edits:
        plan.actions.append(WriteFile(e, f"undo bsdcrypt enable's change to {e.path}"))
    after = loaderconf.effective(loaderconf.apply(files, edits), name)
    state = f'{name}="{after.value}" ({after.path}:{after.line})' if after else f"no {name} line"
    if live:
        now = f"The driver stays loaded until then (kldunload {driver} to unload it now, if nothing uses it)."
    else:  # a system under --root: its kernel is not this one
        now = "Nothing here touches a running kernel."
    plan.actions.append(Note(f"after the next boot: {state}. {now}"))
    return plan


# ---- two names of one file ------------------------------------------------------------------------
