"""Issue 27: a paste without the kernel crypto consumers' outputs gets a paste-partial finding that names
each command completing it (the ones `analyze` reads back: collect/paste.py), what it decides, and what
the pasted parts told instead. The pastes are built from real outputs in fixtures/parsers (each file's
header names its source)."""

from __future__ import annotations

from pathlib import Path

from bsdcrypt.assess import assess
from bsdcrypt.collect.paste import evidence_from_paste
from bsdcrypt.recording import load
from bsdcrypt.status import Status

FIX = Path(__file__).resolve().parents[2] / "fixtures"
COMMANDS = ("`zfs get -t filesystem,volume encryption,keystatus`", "`sysctl net.inet.ipsec`", "`setkey -D`",
            "`sysctl kern.ipc.tls`", "`ifconfig -g openvpn`", "`ifconfig -g wg`")


def body(fixture: str) -> str:
    return (FIX / "parsers" / fixture).read_text().split("# ---\n", 1)[1]


DMESG_122 = body("dmesg/bhyve-guest-12.2-e3-1225v5.txt")
DMESG_14 = body("dmesg/freebsd14-current-ryzen-v1202b-aesni-sha.txt")


def partial(text: str) -> str:
    ev = evidence_from_paste(text)
    assert ev is not None
    return next(f.message for f in assess(ev, "pasted", "paste").findings if f.id == "paste-partial")


def consumer_part(message: str) -> str:
    head, sep, tail = message.partition(" Kernel crypto consumers' outputs not pasted: ")
    assert sep, message
    return tail


def test_a_dmesg_alone_names_every_consumer_command() -> None:
    tail = consumer_part(partial(DMESG_14))
    assert all(c in tail for c in COMMANDS), tail
    assert "as root: the IPsec SAs' ciphers" in tail and "ZFS native encryption" in tail
    assert tail.endswith("paste them too for their verdicts.")
    assert "here" not in tail  # a 14.x dmesg tells nothing of the consumers


def test_what_the_pasted_parts_told_is_said_instead() -> None:
    # 12.2: if_ovpn arrived in 14.0, so the release already tells there is no DCO
    tail = consumer_part(partial(DMESG_122))
    assert "`ifconfig -g openvpn` (the OpenVPN DCO interfaces; here no OpenVPN DCO (if_ovpn arrived in FreeBSD 14.0))" \
        in tail
    # setkey -D pasted: IPsec is in the kernel, so `sysctl net.inet.ipsec` is told; the SAs are no longer lacking
    tail = consumer_part(partial(DMESG_14 + body("setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt")))
    assert "`sysctl net.inet.ipsec` (whether IPsec is in the kernel; here IPsec is in the kernel)" in tail
    assert "`setkey -D`" not in tail
    # a kernel without IPsec (the leaf is unknown): the SAs are moot, and said so
    tail = consumer_part(partial(DMESG_14 + "% sysctl net.inet.ipsec.def_policy\n"
                                 "sysctl: unknown oid 'net.inet.ipsec.def_policy'\n"))
    assert "`setkey -D` (as root: the IPsec SAs' ciphers; here IPsec is not in the kernel)" in tail
    assert "`sysctl net.inet.ipsec`" not in tail


def test_only_the_lacking_parts_are_named_and_a_complete_paste_names_none() -> None:
    some = DMESG_14 + "% sysctl kern.ipc.tls.enable\nkern.ipc.tls.enable: 1\n% ifconfig -g wg\nwg0\n"
    tail = consumer_part(partial(some))
    assert "`sysctl kern.ipc.tls`" not in tail and "`ifconfig -g wg`" not in tail
    assert "`ifconfig -g openvpn`" in tail and "`zfs get" in tail
    every = some + body("setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt") + body("zfs/buetow-f3s-14-zroot-bhyve-two-datasets.txt") \
        + "% sysctl net.inet.ipsec.def_policy\nnet.inet.ipsec.def_policy: 1\n% ifconfig -g openvpn\n"
    message = partial(every)
    assert "Kernel crypto consumers' outputs not pasted" not in message
    assert all(label in message for label in ("setkey -D", "sysctl kern.ipc.tls", "ifconfig groups"))


def _status_of_recording(name: str) -> Status:
    return assess(load(FIX / "hosts" / f"{name}.yaml")[1], "h", "recording")


def test_a_probe_run_has_no_paste_partial_finding() -> None:
    s = _status_of_recording("freebsd-14.0-current-ryzen-v1202b-builtin")
    assert not any(f.id == "paste-partial" for f in s.findings)
