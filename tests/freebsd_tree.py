"""The least of a FreeBSD system a test's --root DIR needs to be taken for one: the ELF header of
boot/kernel/kernel (elf(5): e_ident "\\x7fELF", EI_CLASS 2 = 64-bit, EI_DATA 1 = little-endian,
EI_VERSION 1, EI_OSABI 9 = FreeBSD; e_type 2 = executable; e_machine), the bytes bsdcrypt reads."""

from __future__ import annotations

from pathlib import Path

MACHINES = {"amd64": 62, "i386": 3, "aarch64": 183, "riscv64": 243, "powerpc64le": 21}


def add_kernel(root: Path, arch: str = "amd64") -> Path:
    kernel = root / "boot" / "kernel" / "kernel"
    kernel.parent.mkdir(parents=True, exist_ok=True)
    kernel.write_bytes(b"\x7fELF\x02\x01\x01\x09" + bytes(8) + b"\x02\x00" + MACHINES[arch].to_bytes(2, "little") + bytes(44))
    return kernel
