"""Long runs of blanks or digits inside hostile lines: the parsers read them in bounded time. The old
`(.*?)\\s*$` regexes of dmesg (CPU, driver, GEOM_ELI lines), kenv, Linux's model name and mdconfig's
size, openssl version's first-line regex, and geli list's reflow split and openssl speed's counts
(tried from every digit of a run) backtracked in quadratic to cubic time: 3,000 blanks took 30 s, a
1 MiB line hours or more, with the GIL held (a fleet audit stalled on one host). Each case runs in a
child with a generous deadline."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bsdcrypt.parsers.dmesg import parse_dmesg
from bsdcrypt.parsers.kenv import parse_kenv
from bsdcrypt.parsers.linux import parse_cpuinfo_model
from bsdcrypt.parsers.mdconfig import parse_human_size

BLANKS = 1_000_000
CASES = {
    "x86 CPU line": "parse_dmesg('CPU: Intel(R) Xeon(R)' + ' ' * N + 'x (2000.00-MHz K8-class CPU)z\\n')",
    "arm64 CPU line": "parse_dmesg('CPU  0: ARM Cortex-A72' + ' ' * N + 'x affinity:z\\n')",
    "driver line": "parse_dmesg('aesni0: <AES-CBC>' + ' ' * N + 'x\\n')",
    "GEOM_ELI line": "parse_dmesg('GEOM_ELI: Device a.eli created.\\nGEOM_ELI: Crypto: hardware' + ' ' * N + 'x\\n')",
    "openssl version": "parse_version('OpenSSL 1.1.1 a' + ' ' * N + 'b\\n')",
    "kenv value": "parse_kenv('smbios.system.maker=\"a' + ' ' * N + 'x\\n')",
    "Linux model name": "parse_cpuinfo_model('model name\\t: Intel' + ' ' * N + 'x\\n')",
    "mdconfig size": "parse_human_size('512' + ' ' * N + 'x')",
    "geli list digits": "parse_geli_list('Geom name: a Crypto: x' + '9' * N + '\\n')",
    "openssl speed counts": "parse_counts('Doing aes: ' + '9' * N + 'x\\n')",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_long_blank_run_is_read_in_bounded_time(case: str) -> None:
    code = ("from bsdcrypt.parsers.dmesg import parse_dmesg\n"
            "from bsdcrypt.parsers.openssl_version import parse_version\n"
            "from bsdcrypt.parsers.kenv import parse_kenv\n"
            "from bsdcrypt.parsers.linux import parse_cpuinfo_model\n"
            "from bsdcrypt.parsers.mdconfig import parse_human_size\n"
            "from bsdcrypt.parsers.geli import parse_geli_list\n"
            "from bsdcrypt.parsers.openssl_speed import parse_counts\n"
            f"N = {BLANKS}\n{CASES[case]}\n")
    # the fixed parsers take milliseconds; the old regexes would take hours (a 240 s deadline on a loaded machine)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=240)


@pytest.mark.parametrize(("line", "model"), [
    ("CPU: Intel(R) Xeon(R) CPU E5-2650L v3 @ 1.80GHz (1800.00-MHz K8-class CPU)",
     "Intel(R) Xeon(R) CPU E5-2650L v3 @ 1.80GHz"),
    ("CPU: AMD Ryzen 5 3600 6-Core Processor             (3600.00-MHz K8-class CPU)",
     "AMD Ryzen 5 3600 6-Core Processor"),
    ("CPU: QEMU Virtual CPU version 2.5+(2000.00-MHz 686-class CPU)", "QEMU Virtual CPU version 2.5+"),
    ("CPU: Intel(R) Core(TM)2 Duo CPU (stepping 6)", "Intel(R) Core(TM)2 Duo CPU (stepping 6)"),
    ("CPU  0: ARM Cortex-A72 r0p3 affinity:  0  0", "ARM Cortex-A72 r0p3"),
    ("CPU  0: ARM Cortex-A53 r0p4 affinity:  0", "ARM Cortex-A53 r0p4"),
    ("CPU  0: Xaffinity: y affinity: 0", "Xaffinity: y"),
    ("CPU 0: affinity: x affinity: 0", "affinity: x"),
    ("CPU: (2000.00-MHz K8-class CPU)", None),
])
def test_cpu_model_lines(line: str, model: str | None) -> None:
    assert parse_dmesg(line + "\n").cpu.model == model


def test_driver_and_geli_lines_keep_their_text() -> None:
    d = parse_dmesg("aesni0: <AES-CBC,AES-CCM,AES-GCM,AES-ICM,AES-XTS> on motherboard  \n"
                    "GEOM_ELI: Device ada0p2.eli created.\nGEOM_ELI: Encryption: AES-XTS 256\n"
                    "GEOM_ELI:     Crypto: hardware   \n")
    assert [(m.driver, m.algorithms, m.message) for m in d.drivers] == [
        ("aesni", ("AES-CBC", "AES-CCM", "AES-GCM", "AES-ICM", "AES-XTS"),
         "<AES-CBC,AES-CCM,AES-GCM,AES-ICM,AES-XTS> on motherboard")]
    assert [(g.name, g.encryption, g.key_length, g.crypto) for g in d.geli] == [("ada0p2.eli", "AES-XTS", 256, "hardware")]


@pytest.mark.parametrize(("text", "want"), [
    ('smbios.system.maker="QEMU"', {"smbios.system.maker": "QEMU"}), ("a=b c", {"a": "b c"}),
    ('  a=" b "  ', {"a": " b "}), ('a=""', {"a": ""}), ('a="', {"a": ""}), ('a=x"', {"a": "x"}),
    ("no value", {}), ("=x", {}),
])
def test_kenv_lines(text: str, want: dict[str, str]) -> None:
    assert parse_kenv(text) == want


def test_linux_model_and_mdconfig_size() -> None:
    assert parse_cpuinfo_model("processor\t: 0\nmodel name\t:   AMD EPYC 7R13  \n") == "AMD EPYC 7R13"
    assert parse_cpuinfo_model("model name\t:   \nmodel name\t: B\n") == "B"
    assert [parse_human_size(t) for t in ("1.0G", " 512M ", "64 k", "9" * 400, "1.5X")] == [
        1024**3, 512 * 1024**2, 64 * 1024, None, None]


def test_openssl_speed_counts() -> None:
    from bsdcrypt.parsers.openssl_speed import parse_counts

    text = ("Doing AES-128-GCM for 3s on 16 size blocks: 230000 AES-128-GCM's in 2.99s\n"
            "Doing aes-128 cbc for 3s on 16 size blocks: 1234 aes-128 cbc's in 3.00s\n"
            f"Doing x for 3s on 16 size blocks: {'9' * 5000} x's in 3.00s\n")
    assert parse_counts(text) == [(230000, "AES-128-GCM", 2.99), (1234, "aes-128 cbc", 3.0)]
