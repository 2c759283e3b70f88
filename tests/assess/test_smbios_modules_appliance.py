"""The probe's newer steps (kenv_smbios, module_files, appliance_crypto) on shipped recordings.

No shipped recording has them (they predate them): each test adds the step's output to a real
recording. The step outputs are what the probe's own commands print (bsdcrypt/probe.py); the values are
real ones: VirtualBox's SMBIOS strings from a real `kenv` dump of a VirtualBox guest ("innotek GmbH",
"VirtualBox"), the config.xml tag name from pfSense/OPNsense (`$config['system']['crypto_hardware']`).
"""

from __future__ import annotations

from pathlib import Path

from bsdcrypt.assess import assess
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.parsers.kenv import parse_kenv, smbios_hypervisor
from bsdcrypt.probe import Evidence, Step

HOSTS = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"


def _with(name: str, **steps: Step) -> Evidence:
    ev = ReplayHost.from_file(HOSTS / f"{name}.yaml").evidence
    return Evidence({**ev.steps, **{k.replace("__", ":"): v for k, v in steps.items()}})


def test_kenv_lines_in_both_spellings() -> None:
    env = parse_kenv('smbios.system.maker="innotek GmbH"\nsmbios.system.product=VirtualBox\nsmbios.bios.vendor=\n')
    assert env == {"smbios.system.maker": "innotek GmbH", "smbios.system.product": "VirtualBox", "smbios.bios.vendor": ""}
    assert smbios_hypervisor(env) == "vbox"
    assert smbios_hypervisor({"smbios.system.product": "VMware Virtual Platform"}) == "vmware"
    assert smbios_hypervisor({"smbios.system.product": "Standard PC (Q35 + ICH9, 2009)"}) == "qemu"
    assert smbios_hypervisor({"smbios.system.maker": "Dell Inc.", "smbios.system.product": "PowerEdge R7515"}) is None
    assert smbios_hypervisor({}) is None


def test_smbios_names_virtualbox_where_the_cpu_does_not() -> None:
    # a real recording whose CPU shows no HV bit and no CPUID origin, given VirtualBox's SMBIOS strings (a
    # combination made for this test): SMBIOS alone names the hypervisor
    base = _with("freebsd-12.2-i386-pentium-m-no-aesni-not-loaded")
    assert assess(base, "h", "x").cpu.vm is False
    ev = _with(
        "freebsd-12.2-i386-pentium-m-no-aesni-not-loaded",
        kenv_smbios=Step(0, b"smbios.system.maker=innotek GmbH\nsmbios.system.product=VirtualBox\nsmbios.bios.vendor=innotek GmbH\n"),
    )
    s = assess(ev, "h", "x")
    assert s.cpu.vm is True and s.cpu.hypervisor == "vbox"


def test_a_module_in_boot_modules_is_not_missing() -> None:
    name = "freebsd-12.2-bhyve-aesni-flag-hidden"  # not loaded, /boot/kernel/aesni.ko present
    ev = _with(name, **{"exists__/boot/kernel/aesni.ko": Step(1, b"")})
    assert assess(ev, "h", "x").driver.state == "unknown"  # /boot/modules not checked: not "missing"
    ev = _with(name, **{"exists__/boot/kernel/aesni.ko": Step(1, b""), "module_files": Step(0, b"")})
    assert assess(ev, "h", "x").driver.state == "missing"
    ev = _with(name, **{"exists__/boot/kernel/aesni.ko": Step(1, b""),
                        "module_files": Step(0, b"/boot/modules/aesni.ko\n")})
    d = assess(ev, "h", "x").driver
    assert d.state == "not-loaded" and d.module_file == "/boot/modules/aesni.ko"


def test_the_appliance_setting_when_config_xml_is_readable() -> None:
    name = "pfsense-2.4.5-i5-4590s-loaded"
    inferred = assess(_with(name), "h", "x")
    # config.xml not read, module loaded, no loader.conf line: persisted by the setting, inferred (issue 27)
    assert inferred.persist.configured is True and inferred.persist.source == "appliance setting (inferred)"
    assert inferred.persist.inferred is not None
    assert any(f.id == "appliance-managed" and "inferred" in f.message for f in inferred.findings)
    on = assess(_with(name, appliance_crypto=Step(0, b"<crypto_hardware>aesni</crypto_hardware>\n")), "h", "x")
    assert on.persist.configured is True and "crypto_hardware=aesni" in (on.persist.source or "")
    assert any(f.id == "appliance-managed" and "selects it" in f.message for f in on.findings)
    off = assess(_with(name, appliance_crypto=Step(1, b"")), "h", "x")  # no tag: the setting is None
    assert off.persist.configured is False and any(f.id == "not-persisted" for f in off.findings)
    denied = assess(_with(name, appliance_crypto=Step(2, b"grep: /cf/conf/config.xml: Permission denied\n")), "h", "x")
    assert denied.persist.configured is True and denied.persist.source == "appliance setting (inferred)"
