"""kenv(1) parser on a real dump (fixtures/parsers/kenv/): every variable, and the hypervisor SMBIOS names."""

from __future__ import annotations

import pytest

from bsdcrypt.parsers.kenv import parse_kenv, smbios_hypervisor
from tests.parsers._load import load, names

# fixture -> (variables an expert reads from it, the hypervisor they name)
CASES = {
    # VirtualBox writes its maker and product into SMBIOS; the ACPI OEM id says VBOX as well.
    "shivansh-smoketests-virtualbox-kenv.txt": (
        {"smbios.system.maker": "innotek GmbH", "smbios.system.product": "VirtualBox",
         "smbios.bios.vendor": "innotek GmbH", "smbios.planar.maker": "Oracle Corporation",
         "acpi.oem": "VBOX  ", "module_path": "/boot/kernel;/boot/modules", "bootenv_root[2]": "",
         "kernel[1]": "kernel.old", "beansi_bootfs": "^[1mbootfs: ^[m"},
        "vbox"),
}


def test_every_kenv_fixture_has_a_case() -> None:
    assert set(names("kenv")) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_kenv_dump(name: str) -> None:
    text = load("kenv", name)
    env = parse_kenv(text)
    expected, hypervisor = CASES[name]
    for key, value in expected.items():
        assert env[key] == value, key
    # every name="value" line of the dump is one variable, nothing else is
    assert len(env) == sum(1 for line in text.splitlines() if '="' in line)
    assert smbios_hypervisor(env) == hypervisor

