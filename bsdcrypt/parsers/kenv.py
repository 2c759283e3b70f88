"""kenv(1) lines -> {name: value}, and the hypervisor that SMBIOS strings name.

Formats: `kenv` prints every variable as `name="value"` (usr.bin/kenv/kenv.c kdumpenv; a real dump of
a VirtualBox guest is in fixtures/parsers/kenv/); the probe's kenv_smbios step prints
`name=value` (`printf '%s=' NAME; kenv -q NAME`), an empty value when the variable is unset.
"""

from __future__ import annotations

import re

from bsdcrypt.parsers import clean_text

_LINE = re.compile(r"^([A-Za-z0-9_.\[\]-]+)=")  # on the stripped line: the value is the rest, unquoted

# smbios.system.maker / .product and smbios.bios.vendor values of hypervisors -> kern.vm_guest names.
# The product names are the ones sys/x86/x86/identcpu.c matches (vm_pnames: "VMware Virtual Platform",
# "VirtualBox", "Parallels Virtual Platform", "KVM"; vm_bnames: "QEMU", "Bochs", "Xen", "BHYVE",
# "Seabios"); makers as the hypervisors set them (VirtualBox: "innotek GmbH").
_MAKERS = (
    ("innotek GmbH", "vbox"),
    ("VMware, Inc.", "vmware"),
    ("QEMU", "qemu"),
    ("Xen", "xen"),
    ("Parallels", "parallels"),
    ("BHYVE", "bhyve"),
)
_PRODUCTS = (
    ("VirtualBox", "vbox"),
    ("VMware", "vmware"),
    ("Parallels Virtual Platform", "parallels"),
    ("KVM", "kvm"),
    ("BHYVE", "bhyve"),
    ("HVM domU", "xen"),
    ("Standard PC (", "qemu"),
)
_BIOS = (("innotek GmbH", "vbox"), ("QEMU", "qemu"), ("Bochs", "qemu"), ("Xen", "xen"), ("BHYVE", "bhyve"))


def parse_kenv(text: str) -> dict[str, str]:
    """`name="value"` or `name=value` lines; anything else is skipped. Never raises."""
    out: dict[str, str] = {}
    for line in clean_text(text).splitlines():
        line = line.strip()
        m = _LINE.match(line)
        if m:
            # an optional quote at each end, by str tests: the regex form `"?(.*?)"?\s*$` backtracked
            # quadratically over a long blank run inside a hostile value
            value = line[m.end():]
            value = value[1:] if value.startswith('"') else value
            out[m.group(1)] = value[:-1] if value.endswith('"') else value
    return out


def smbios_hypervisor(env: dict[str, str]) -> str | None:
    """The hypervisor the SMBIOS strings name (kern.vm_guest spelling, "qemu" for QEMU/KVM), else None."""
    product = env.get("smbios.system.product", "")
    maker = env.get("smbios.system.maker", "")
    bios = env.get("smbios.bios.vendor", "")
    for prefix, name in _PRODUCTS:
        if product.startswith(prefix):
            return name
    for prefix, name in _MAKERS:
        if maker.startswith(prefix):
            return name
    for prefix, name in _BIOS:
        if bios == prefix:
            return name
    return None
