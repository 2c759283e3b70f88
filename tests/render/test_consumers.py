"""The consumers in every report (issue 27): the status table's Consumers row, JSON, the fleet's
"AES in software" column (text, CSV, HTML) and the HTML details. Real recordings given the consumer
steps' outputs (fixtures/parsers: real published setkey and zfs outputs), as tests/assess/test_smbios_modules_appliance.py does."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from bsdcrypt import fleet
from bsdcrypt.assess import assess
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.hostsfile import HostEntry
from bsdcrypt.probe import Evidence, Step, StepName
from bsdcrypt.render import consumers as consumers_render
from bsdcrypt.render import fleet as fleet_render
from bsdcrypt.render import html
from bsdcrypt.render.status import render
from bsdcrypt.status import Status

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / "fixtures" / "hosts"
FIX = ROOT / "fixtures" / "parsers"


def out(fixture: str) -> bytes:
    return (FIX / fixture).read_text().split("# ---\n", 1)[1].encode()


def _with(name: str, **steps: Step) -> Status:
    ev = ReplayHost.from_file(HOSTS / f"{name}.yaml").evidence
    return assess(Evidence({**ev.steps, **steps}), name, "test")


# freebsd-12.2-bhyve-not-loaded-overridden: a real 12.2 bhyve guest whose CPU shows AES-NI, aesni not loaded
NOT_LOADED = "freebsd-12.2-bhyve-not-loaded-overridden"
CONSUMER_STEPS = {
    StepName.SETKEY_SAD: Step(0, out("setkey/bsdrp-ipsec-lab-aes-gcm-16-static.txt")),
    StepName.ZFS_CRYPTO: Step(0, out("zfs/buetow-f3s-14-zroot-bhyve-two-datasets.txt")),
    StepName.SYSCTL_KTLS: Step(1, out("ktls/derived-no-ktls-kernel.txt")),
    StepName.TUNNEL_GROUPS: Step(0, out("tunnels/derived-13-none.txt")),
}


def test_an_aes_gcm_sa_on_12x_without_aesni_is_a_warning_listed_first() -> None:
    s = _with(NOT_LOADED, **CONSUMER_STEPS)
    warnings = [f.id for f in s.findings if f.severity == "warning"]
    assert warnings[0] == "consumer-aes-software", warnings
    table = render(s, "table")
    assert "Consumers" in table
    assert "IPsec: software, 4 SA(s)" in table and "4 ESP SAs aes-gcm-16: software (aesni is not-loaded)" in table
    assert "ZFS encryption: software" in table and "zroot/bhyve aes-256-gcm" in table
    assert "kernel TLS" not in table  # not in this 12.x kernel: not listed
    data = json.loads(render(s, "json"))
    assert [c["kind"] for c in data["consumers"]] == ["geli", "zfs", "ipsec", "ktls", "ovpn-dco", "wireguard"]
    assert data["consumers"][2]["items"][0]["verdict"] == "software"


def test_without_consumer_steps_the_table_is_as_before() -> None:
    s = _with(NOT_LOADED)
    assert "Consumers" not in render(s, "table")
    assert all(c.verdict in ("unknown", "not-in-use") for c in s.consumers)


def test_fleet_rows_csv_and_html_carry_the_consumers() -> None:
    slow = _with(NOT_LOADED, **CONSUMER_STEPS)
    plain = _with(NOT_LOADED)
    results = [fleet.HostResult(HostEntry(spec=f"replay:{n}", source=f"hosts.txt:{i}", replay=n), s, 0.01)
               for i, (n, s) in enumerate((("a.yaml", slow), ("b.yaml", plain)), 1)]
    run = fleet.FleetRun(results, 1.0, 2, 30.0)
    rows = {r["host"]: r for r in (fleet_render.row(x) for x in results)}
    assert rows["replay:a.yaml"]["consumers_software"] == "ZFS encryption, IPsec"
    assert rows["replay:b.yaml"]["consumers_software"] == "-"
    table = fleet_render.render_table(run)
    assert "AES in software" in table and "ZFS encryption, IPsec" in table
    csv_rows = list(csv.DictReader(io.StringIO(fleet_render.render_csv(run))))
    assert [r["consumers_software"] for r in csv_rows] == ["ZFS encryption, IPsec", "-"]
    page = html.fleet_page(run, title="t", source="hosts.txt", command="fleet-audit")
    assert "AES in software" in page and "4 ESP SAs aes-gcm-16: software" in page
    doc = json.loads(fleet_render.render(run, "json"))
    assert doc["hosts"][0]["consumers"][1]["verdict"] == "software"


def test_host_text_in_a_dataset_name_is_made_visible() -> None:
    evil = b"zroot/\x1b[31mred\tencryption\taes-256-gcm\n"
    s = _with(NOT_LOADED, **{StepName.ZFS_CRYPTO: Step(0, evil)})
    # a name with an escape is no dataset name bsdcrypt reads, but the probe kept the line (encryption not
    # off): an encrypted dataset may be there, so unknown, never "no encrypted dataset"; shown visibly
    assert (s.consumers[1].present, s.consumers[1].verdict) == (None, "unknown")
    assert "\x1b" not in render(s, "table")
    # an SA algorithm name is kept as the host printed it: the table shows its escape visibly
    s = _with(NOT_LOADED, **{StepName.SETKEY_SAD: Step(0, b"\tesp mode=tunnel\n\tE: aes\x1b[2Jx\n")})
    assert s.consumers[2].items[0].algorithm == "aes\x1b[2Jx"
    table = render(s, "table")
    assert "\x1b" not in table and "aes\\x1b[2Jx" in table


# Issue 27 part 2: a VM that hides AES-NI (the real 12.2 bhyve guest with AESNI taken out of Features2:
# freebsd-12.2-bhyve-aesni-flag-hidden) running IPsec with AES-GCM SAs, an OpenVPN DCO tunnel and sshd
HIDDEN = "freebsd-12.2-bhyve-aesni-flag-hidden"


def _vm_finding(s: Status) -> str:
    return next(f.remedy for f in s.findings if f.id == "vm-hides-aesni")


def test_on_a_vm_hiding_aesni_the_finding_names_bsdcrypt_userland() -> None:
    remedy = _vm_finding(_with(HIDDEN))
    assert "`bsdcrypt userland`" in remedy and "still execute" in remedy
    # without consumer or service evidence the advice stays the general one
    assert "where the protocol allows (IPsec, TLS/KTLS, SSH, WireGuard)" in remedy


def test_the_chacha_advice_names_the_consumers_and_services_found() -> None:
    s = _with(HIDDEN, **{
        StepName.SETKEY_SAD: CONSUMER_STEPS[StepName.SETKEY_SAD],
        StepName.TUNNEL_GROUPS: Step(0, b"== openvpn\novpn0\n== wg\nwg0\n"),
        StepName.ZFS_CRYPTO: CONSUMER_STEPS[StepName.ZFS_CRYPTO],
        # the probe's crypto_links format (as recorded in linux-debian12-epyc-openssl3-userland.yaml), FreeBSD paths
        StepName.CRYPTO_LINKS: Step(0, b"== /usr/sbin/sshd\n\tlibcrypto.so.111 => /lib/libcrypto.so.111\n"),
    })
    remedy = _vm_finding(s)
    assert "prefer ChaCha20-Poly1305 for what this host runs with AES: IPsec (4 ESP SAs)" in remedy
    # ovpn0 in group openvpn on this 12.2 host is no DCO interface (if_ovpn arrived in 14.0): not named
    assert "OpenVPN DCO" not in remedy and "the services sshd" in remedy
    assert "ZFS" not in remedy.split("runs with AES:")[1]  # no other cipher to move a dataset to
    assert "`bsdcrypt userland`" in remedy
    slow = next(f for f in s.findings if f.id == "consumer-aes-software")
    assert "hides AES-NI" in slow.message and "WireGuard" not in slow.message


def test_the_shipped_ipsec_recording_reads_as_the_issue_says() -> None:
    # an AES-GCM IPsec SA on a 12.x host whose aesni is not loaded: a warning, the first one listed
    s = assess(ReplayHost.from_file(HOSTS / "freebsd-12.2-bhyve-ipsec-aes-gcm-aesni-not-loaded.yaml").evidence, "h", "t")
    k = {c.kind: c for c in s.consumers}
    assert k["ipsec"].verdict == "software" and k["ipsec"].items[0].cipher == "AES-GCM"
    assert k["ktls"].present is False and k["zfs"].present is False and k["ovpn-dco"].present is False
    assert [f.id for f in s.findings if f.severity == "warning"][:2] == ["consumer-aes-software", "driver-not-loaded"]


def test_fleet_cell_is_unknown_not_no_when_a_consumer_in_use_is_unknown() -> None:
    # IPsec in the kernel, its SAs unreadable without root: whether they run AES in software is not known
    unreadable = {StepName.SYSCTL_IPSEC: Step(0, b"net.inet.ipsec.def_policy: 1\n"),
                  StepName.SETKEY_SAD: Step(1, b"pfkey_open: Operation not permitted\n"),
                  StepName.TUNNEL_GROUPS: Step(0, out("tunnels/derived-14-ovpn-and-wg.txt"))}
    s = _with(NOT_LOADED, **unreadable)
    ipsec = next(c for c in s.consumers if c.kind == "ipsec")
    assert (ipsec.present, ipsec.verdict) == (True, "unknown")
    assert consumers_render.software(s) == "?"
    # the same host with the SAs read as root and none in software: no
    readable = {**unreadable, StepName.SETKEY_SAD: Step(0, b"No SAD entries.\n")}
    assert consumers_render.software(_with(NOT_LOADED, **readable)) == "no"
