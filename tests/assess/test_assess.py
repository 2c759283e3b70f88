"""The assessment's decisions on real recordings, stated explicitly (the golden files hold the rest)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bsdcrypt.assess import assess
from bsdcrypt.hosts.replay import ReplayHost
from bsdcrypt.pipeline import status_of
from bsdcrypt.probe import Evidence, Step

HOSTS = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"

# recording: (variant, driver state, attached, persisted, verdict, finding ids)
EXPECTED = {
    "freebsd-10.2-kvm-digitalocean-geli-hardware-kldloaded": ("freebsd", "loaded", True, False, "warning", ["not-persisted"]),
    "freebsd-12.2-i386-pentium-m-no-aesni-not-loaded": ("freebsd", "not-loaded", False, False, "ok", ["cpu-no-aesni"]),
    "freebsd-12.2-i386-pentium-m-no-aesni-kldloaded-no-device": ("freebsd", "no-device", False, False, "ok", ["cpu-no-aesni"]),
    "freebsd-12.2-bhyve-aesni-kldloaded-persisted": ("freebsd", "loaded", True, True, "ok", []),
    "freebsd-14.0-current-arm64-rk3399-armv8crypto-builtin": ("freebsd", "builtin", True, True, "ok", []),
    # appliances with the module loaded and config.xml not readable: persisted by the appliance (inferred, issue 27)
    "opnsense-21.1-hbsd12.1-bhyve-omnios-loaded": ("opnsense", "loaded", True, True, "ok", ["appliance-managed"]),
    "opnsense-21.1-hbsd12.1-xen-viridian-loaded": ("opnsense", "loaded", True, True, "ok", ["appliance-managed"]),
    "freebsd-11.0-current-custom-kernel-x-no-aesni": ("freebsd", "not-loaded", False, False, "warning", ["driver-not-loaded"]),
    "freebsd-12.2-bhyve-aesni-flag-hidden": ("freebsd", "not-loaded", False, False, "warning", ["vm-hides-aesni"]),
    "freebsd-12.2-bhyve-geli-software-aesni-kldloaded": (
        "freebsd", "loaded", True, False, "critical", ["geli-software", "not-persisted"],
    ),
    "freebsd-12.2-bhyve-not-loaded-overridden": ("freebsd", "not-loaded", False, False, "warning", ["driver-not-loaded"]),
    # issue 27: the same host running IPsec with AES-GCM SAs: what is slow now comes first
    "freebsd-12.2-bhyve-ipsec-aes-gcm-aesni-not-loaded": (
        "freebsd", "not-loaded", False, False, "warning", ["consumer-aes-software", "driver-not-loaded"],
    ),
    "freebsd-13.0-hyperv-builtin": ("freebsd", "builtin", True, True, "ok", []),
    "freebsd-14.0-current-ryzen-v1202b-builtin": ("freebsd", "builtin", True, True, "ok", []),
    "freebsd-15.0-kvm-aliyun-builtin": ("freebsd", "builtin", True, True, "ok", []),
    "freenas-11.3-xeon-x3430-no-aesni-old-msg": ("freenas", "no-device", False, True, "ok", ["cpu-no-aesni"]),
    "hardenedbsd-13.0-stable-epyc-builtin": ("hardenedbsd", "builtin", True, True, "ok", []),
    "opnsense-20.7-hbsd12.1-i5-6200u-loaded": ("opnsense", "loaded", True, True, "ok", ["appliance-managed"]),
    "opnsense-22.1-celeron-j4125-sha-only-builtin": (
        "opnsense", "builtin", True, True, "warning", ["aes-disabled-in-firmware"],
    ),
    "opnsense-22.1-core2-e7400-no-aes-builtin": ("opnsense", "no-device", False, True, "ok", ["cpu-no-aesni"]),
    # pfSense keeps the setting in config.xml, which this recording lacks: whether it is set is unknown
    "pfsense-2.4.5-celeron-j3160-not-loaded": ("pfsense", "not-loaded", False, None, "warning", ["driver-not-loaded"]),
    "pfsense-2.4.5-i5-4590s-loaded": ("pfsense", "loaded", True, True, "ok", ["appliance-managed"]),
    "truenas-12.2-xeon-x3430-no-aes-builtin": ("truenas", "no-device", False, True, "ok", ["cpu-no-aesni"]),
    "truenas-13.1-celeron-n3150-builtin": ("truenas", "builtin", True, True, "ok", []),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_expert_conclusion(name: str) -> None:
    variant, state, attached, persisted, verdict, ids = EXPECTED[name]
    s = status_of(ReplayHost.from_file(HOSTS / f"{name}.yaml"))
    assert s.os.variant == variant
    assert s.driver.state == state
    assert s.driver.attached is attached
    assert s.persist.configured is persisted
    assert s.verdict == verdict
    assert [f.id for f in s.findings] == ids
    for f in s.findings:
        assert f.message and f.remedy and "\n" not in f.message


def test_overridden_yes_in_loader_conf_local_is_not_persisted() -> None:
    s = status_of(ReplayHost.from_file(HOSTS / "freebsd-12.2-bhyve-not-loaded-overridden.yaml"))
    assert s.persist.source is not None and s.persist.source.startswith("/boot/loader.conf.local:")
    assert s.persist.value is not None and s.persist.value.upper() == "NO"


def test_appliance_remedy_names_the_settings_page_not_loader_conf() -> None:
    s = status_of(ReplayHost.from_file(HOSTS / "pfsense-2.4.5-celeron-j3160-not-loaded.yaml"))
    remedy = s.findings[0].remedy
    assert "System > Advanced > Miscellaneous" in remedy and "loader.conf" not in remedy


def test_arm64_uses_armv8crypto() -> None:
    s = status_of(ReplayHost.from_file(HOSTS / "freebsd-14.0-current-arm64-rk3399-armv8crypto-builtin.yaml"))
    assert s.os.arch == "aarch64" and s.driver.name == "armv8crypto" and s.cpu.aesni is True
    assert "AES-XTS" in s.driver.algorithms


def test_every_shipped_recording_has_an_explicit_expectation() -> None:
    names = {p.stem for p in HOSTS.glob("*.yaml")} - {"linux-debian12-local", "linux-debian12-epyc-openssl3-userland"}
    assert names == set(EXPECTED)


def test_linux_host_is_reported_not_assessed() -> None:
    s = status_of(ReplayHost.from_file(HOSTS / "linux-debian12-local.yaml"))
    assert s.os.name == "Linux" and s.verdict == "unknown" and s.exit_code == 3
    assert s.findings[0].id == "not-freebsd"
    assert s.cpu.aesni is not None


@pytest.mark.parametrize(
    "steps",
    [
        {},
        {"uname_s": Step(0, b"\x00\xff garbage\n")},
        {"uname_s": Step(0, b"FreeBSD\n"), "sysctl": Step(0, b"kern.osrelease: \n")},
        {"uname_s": Step(0, b"FreeBSD\n"), "kldstat_v": Step(0, b"Id Refs Address Size Name\n 1 x y z\n")},
        {"uname_s": Step(127, b"uname: not found\n")},
    ],
)
def test_garbage_evidence_is_unknown_never_an_exception(steps: dict[str, Step]) -> None:
    s = assess(Evidence(steps), "h", "test")
    assert s.verdict in ("unknown", "warning")
    assert s.findings


LOADERCONF = Path(__file__).resolve().parents[2] / "fixtures" / "loaderconf"


def _real_loader_conf(name: str) -> bytes:
    data = (LOADERCONF / name).read_bytes()
    return data.split(b"# ---\n", 1)[1]


@pytest.mark.parametrize(
    ("conf_path", "conf"),
    [
        ("/boot/loader.conf", "remetremet-router-aesni-tabs-comments.txt"),
        ("/boot/loader.conf.local", "bsdrp-netbenches-apu2-ipsec-loader-conf-local-aesni.txt"),
    ],
)
def test_loaded_and_persisted_is_ok(conf_path: str, conf: str) -> None:
    """The state right after `kldload aesni` + `aesni_load="YES"`, before any reboot: the real 10.2 droplet
    (aesni kldloaded by hand, dmesg.boot from before the load) with a real loader configuration that loads aesni."""
    from bsdcrypt.recording import load

    ev = load(HOSTS / "freebsd-10.2-kvm-digitalocean-geli-hardware-kldloaded.yaml")[1]
    ev.steps[f"file:{conf_path}"] = Step(0, _real_loader_conf(conf))
    s = assess(ev, "droplet", "test")
    assert s.driver.state == "loaded" and s.persist.configured is True and s.persist.needed is True
    assert s.persist.source is not None and s.persist.source.startswith(conf_path + ":")
    assert "not-persisted" not in [f.id for f in s.findings]
    assert s.verdict == "ok"
    assert s.geli[0].crypto == "hardware" and s.geli[0].accelerated is True


def _geli_list_with_auth(auth: str | None) -> bytes:
    """The source-derived 14.x `geli list` (md0.eli accelerated, ada1p1.eli on software), with an
    AuthenticationAlgorithm line where libgeom prints it (after KeyLength) when `auth` is given."""
    text = (Path(__file__).resolve().parents[2] / "fixtures/parsers/geli/derived-14-geli-list-onetime-and-disk.txt").read_text()
    text = text.split("# ---\n", 1)[1]
    if auth:
        text = text.replace("KeyLength: 256\n", f"KeyLength: 256\nAuthenticationAlgorithm: {auth}\n", 1)
    return text.encode()


@pytest.mark.parametrize(
    ("auth", "ids", "verdict"),
    [
        (None, ["geli-software"], "critical"),
        ("HMAC/SHA256", ["geli-software"], "critical"),  # the Ryzen has SHA extensions: aesni does SHA256 HMAC
        ("HMAC/SHA512", ["geli-auth-unaccelerated"], "ok"),  # no driver does it: software is expected, not stuck
    ],
)
def test_geli_provider_on_software_depends_on_its_hmac(auth: str | None, ids: list[str], verdict: str) -> None:
    from bsdcrypt.recording import load

    ev = load(HOSTS / "freebsd-14.0-current-ryzen-v1202b-builtin.yaml")[1]
    ev.steps["geli_list"] = Step(0, _geli_list_with_auth(auth))
    s = assess(ev, "h", "test")
    assert [f.id for f in s.findings] == ids
    assert s.verdict == verdict
    soft = next(g for g in s.geli if g.name == "ada1p1.eli")
    assert soft.authentication == auth and soft.accelerated is False
    if ids == ["geli-software"]:
        assert "compiled in" in s.findings[0].message  # not "attached before aesni was available"


@pytest.mark.parametrize("system", ["OpenBSD", "NetBSD", "DragonFly", "Darwin"])
def test_other_bsds_are_not_assessed_as_freebsd(system: str) -> None:
    ev = Evidence(
        {
            "uname_s": Step(0, f"{system}\n".encode()),
            "sysctl": Step(0, b"kern.ostype: X\nkern.osrelease: 7.4\nhw.machine_arch: amd64\n"),
        }
    )
    s = assess(ev, "h", "test")
    assert [f.id for f in s.findings] == ["unknown-os"] and s.exit_code == 3
    assert system in s.findings[0].message


def test_a_cut_off_recording_says_its_conclusions_may_be_incomplete() -> None:
    from bsdcrypt.recording import load

    ev = load(HOSTS / "freebsd-13.0-hyperv-builtin.yaml")[1]
    names = list(ev.steps)
    cut = Evidence({n: ev.steps[n] for n in names[: names.index("geli_list")]})  # output ends before geli list
    s = assess(cut, "h", "test")
    assert s.findings[-1].id == "probe-partial" and "geli_list" in s.findings[-1].message
    assert s.verdict == "unknown"


def test_loader_conf_d_does_not_count_before_13() -> None:
    """lualoader's loader_conf_dirs arrived in 13.0: a 12.2 loader never reads /boot/loader.conf.d."""
    from bsdcrypt.recording import load

    ev = load(HOSTS / "freebsd-12.2-bhyve-geli-software-aesni-kldloaded.yaml")[1]
    ev.steps["file:/boot/loader.conf.d/aesni.conf"] = Step(0, b'aesni_load="YES"\n')
    s = assess(ev, "h", "test")
    assert s.persist.configured is False and s.persist.ignored == "/boot/loader.conf.d/aesni.conf:1"
    assert "loader-conf-d-ignored" in [f.id for f in s.findings] and "not-persisted" in [f.id for f in s.findings]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("opnsense-20.7-hbsd12.1-i5-6200u-loaded", False),  # OPNsense's SMP kernel: aesni comes from aesni.ko
        ("opnsense-21.1-hbsd12.1-bhyve-omnios-loaded", False),
        ("opnsense-21.1-hbsd12.1-xen-viridian-loaded", False),
        ("hardenedbsd-13.0-stable-epyc-builtin", True),  # the HARDENEDBSD kernel compiles it in
        ("opnsense-22.1-celeron-j4125-sha-only-builtin", True),
        ("truenas-12.2-xeon-x3430-no-aes-builtin", True),  # TrueNAS' own kernel has it although 12.x GENERIC does not
        ("pfsense-2.4.5-celeron-j3160-not-loaded", False),
        ("freebsd-11.0-current-custom-kernel-x-no-aesni", False),
        ("freebsd-13.0-hyperv-builtin", True),
    ],
)
def test_in_generic_is_about_the_stock_kernel_of_the_host(name: str, expected: bool) -> None:
    s = status_of(ReplayHost.from_file(HOSTS / f"{name}.yaml"))
    assert s.driver.in_generic is expected


def test_in_generic_of_an_hbsd_appliance_without_kldstat_is_unknown() -> None:
    from bsdcrypt.assess.driver import in_generic
    from bsdcrypt.status import OSInfo

    opnsense = OSInfo(variant="opnsense", base="hardenedbsd", major=12, minor=1, kernel_ident="SMP")
    assert in_generic("aesni", opnsense) is None
    assert in_generic("aesni", opnsense, compiled_in=False) is False
    hbsd_custom = OSInfo(variant="hardenedbsd", base="hardenedbsd", major=12, minor=1, kernel_ident="MYKERNEL")
    assert in_generic("aesni", hbsd_custom, compiled_in=False) is True  # its stock kernel is still HARDENEDBSD


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("Intel(R) Core(TM) i5-4590S CPU @ 3.00GHz", "Intel Core i5/i7/i9 (2nd generation or later)"),
        ("Intel(R) Core(TM) i7-2600K CPU @ 3.40GHz", "Intel Core i5/i7/i9 (2nd generation or later)"),
        ("11th Gen Intel(R) Core(TM) i7-11375H @ 3.30GHz", "Intel Core i5/i7/i9 (2nd generation or later)"),
        ("Intel(R) Core(TM) i3-7100U CPU @ 2.40GHz", "Intel Core i3 (5th generation or later)"),
        ("Intel(R) Xeon(R) CPU E31230 @ 3.20GHz", "Intel Xeon E3/E5/E7"),
        ("Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz", "Intel Xeon E3/E5/E7"),
        ("Intel(R) Xeon(R) CPU E7-8857 v2 @ 3.00GHz", "Intel Xeon E3/E5/E7"),
        ("Intel(R) Xeon(R) CPU E3-1225 v5 @ 3.30GHz", "Intel Xeon E3/E5/E7"),
        ("Intel(R) Xeon(R) Silver 4110 CPU @ 2.10GHz", "Intel Xeon Scalable/D/E/W"),
        ("AMD EPYC 7402P 24-Core Processor               ", "AMD Ryzen/Threadripper/EPYC"),
        ("AMD Ryzen Embedded V1202B with Radeon Vega Gfx ", "AMD Ryzen/Threadripper/EPYC"),
        ("AMD FX(tm)-8350 Eight-Core Processor", "AMD FX"),
        # families with models that lack AES-NI are never claimed
        ("Intel(R) Core(TM) i3-2100 CPU @ 3.10GHz", None),  # Sandy Bridge i3: no AES-NI
        ("Intel(R) Core(TM) i3-3220 CPU @ 3.30GHz", None),  # Ivy Bridge i3: no AES-NI
        ("Intel(R) Core(TM) i7 CPU         920  @ 2.67GHz", None),  # Nehalem
        ("Intel(R) Xeon(R) CPU           X3430  @ 2.40GHz", None),  # Lynnfield
        ("Intel(R) Core(TM)2 Duo CPU     E7400  @ 2.80GHz", None),
        ("Intel(R) Celeron(R) J4125 CPU @ 2.00GHz", None),
        ("Intel(R) Pentium(R) M processor 2.13GHz", None),
        ("AMD Opteron(tm) Processor 6174", None),  # Magny-Cours
        (None, None),
    ],
)
def test_cpu_families_known_to_have_aes_ni(model: str | None, family: str | None) -> None:
    from bsdcrypt.assess.findings import aes_family

    assert aes_family(model) == family


def _without_aesni_flag(name: str) -> Evidence:
    """A real bare-metal recording whose Features2 lost AESNI, as when the firmware switches AES-NI off."""
    from bsdcrypt.recording import load

    ev = load(HOSTS / f"{name}.yaml")[1]
    dmesg = ev.steps["file:/var/run/dmesg.boot"]
    assert b"AESNI," in dmesg.out
    ev.steps["file:/var/run/dmesg.boot"] = Step(dmesg.rc, dmesg.out.replace(b"AESNI,", b""))
    return ev


def test_aes_ni_switched_off_in_the_firmware_of_a_cpu_that_has_it() -> None:
    s = assess(_without_aesni_flag("freebsd-11.0-current-custom-kernel-x-no-aesni"), "h", "test")
    assert s.cpu.aesni is False and s.cpu.vm is False
    assert [f.id for f in s.findings] == ["aes-disabled-in-firmware"] and s.verdict == "warning"
    f = s.findings[0]
    assert "probably disabled in the firmware (BIOS/UEFI setup)" in f.message and "Xeon" in f.message
    assert "BIOS/UEFI" in f.remedy and "kldload aesni" in f.remedy and "newer hardware" not in f.remedy


def test_a_cpu_without_aes_ni_stays_an_info() -> None:
    s = status_of(ReplayHost.from_file(HOSTS / "opnsense-22.1-core2-e7400-no-aes-builtin.yaml"))
    assert [f.id for f in s.findings] == ["cpu-no-aesni"] and s.verdict == "ok"


def test_kernel_aes_users_follow_the_release() -> None:
    from bsdcrypt.assess.findings import kernel_aes_users
    from bsdcrypt.status import OSInfo, Status

    def users(major: int | None, variant: str = "freebsd") -> str:
        return kernel_aes_users(Status(host="h", source="s", os=OSInfo(variant=variant, major=major)))

    assert users(11) == users(12) == "GELI, IPsec"  # no KTLS, no ZFS native encryption before 13.0
    assert users(13) == users(15) == "GELI, ZFS encryption, IPsec, KTLS"
    assert users(12, "truenas") == "GELI, ZFS encryption, IPsec"  # TrueNAS 12 ships OpenZFS 2.0
    s = status_of(ReplayHost.from_file(HOSTS / "freebsd-12.2-bhyve-not-loaded-overridden.yaml"))
    assert "KTLS" not in s.findings[0].message and "(GELI, IPsec)" in s.findings[0].message


def test_driver_not_loaded_with_unknown_cpu_says_it_may_run_in_software() -> None:
    from bsdcrypt.recording import load

    ev = load(HOSTS / "pfsense-2.4.5-celeron-j3160-not-loaded.yaml")[1]
    ev.steps["file:/var/run/dmesg.boot"] = Step(0, b"")  # a dmesg.boot that kept no CPU lines
    s = assess(ev, "h", "test")
    assert s.cpu.aesni is None
    f = s.findings[0]
    assert f.id == "driver-not-loaded" and "may run in software" in f.message and "runs in software" not in f.message
    assert f.remedy.startswith("Check the CPU first")


@pytest.mark.parametrize(
    ("crypto_line", "expected"),
    [
        ("Crypto: UNKNOWN", "reports `Crypto: UNKNOWN`"),  # g_eli_dumpconf's default branch
        ("Crypto: quantum", "unrecognized `Crypto: quantum`"),
        ("", "shows no `Crypto:` line"),
    ],
)
def test_geli_crypto_that_is_not_a_known_value_is_an_unknown_finding(crypto_line: str, expected: str) -> None:
    from bsdcrypt.recording import load

    ev = load(HOSTS / "freebsd-14.0-current-ryzen-v1202b-builtin.yaml")[1]
    text = _geli_list_with_auth(None).decode().replace("Crypto: software\n", crypto_line + "\n" if crypto_line else "")
    ev.steps["geli_list"] = Step(0, text.encode())
    s = assess(ev, "h", "test")
    unknown = [f for f in s.findings if f.id == "geli-crypto-unknown"]
    assert len(unknown) == 1 and expected in unknown[0].message and "ada1p1.eli" in unknown[0].message
    assert s.verdict == "unknown"


def _with_ossl_loaded(name: str, release: str | None = None) -> Evidence:
    """A real recording with ossl.ko kldloaded: ossl0 attaches with ossl.c's description "OpenSSL crypto"."""
    from bsdcrypt.recording import load

    ev = load(HOSTS / f"{name}.yaml")[1]
    dev = ev.steps["sysctl_dev"]
    ossl = (
        b"dev.ossl.0.%parent: nexus0\ndev.ossl.0.%pnpinfo: \ndev.ossl.0.%location: \n"
        b"dev.ossl.0.%driver: ossl\ndev.ossl.0.%desc: OpenSSL crypto\n"
    )
    ev.steps["sysctl_dev"] = Step(dev.rc - 1, dev.out.replace(b"sysctl: unknown oid 'dev.ossl'\n", ossl))
    ev.steps["kldstat_m:ossl"] = Step(0, b"")
    kld = ev.steps["kldstat_v"]
    ev.steps["kldstat_v"] = Step(kld.rc, kld.out + (
        b" 9    1 0xffffffff82a00000    2f2e8 ossl.ko (/boot/kernel/ossl.ko)\n"
        b"\tContains modules:\n\t\t Id Name\n\t\t500 nexus/ossl\n"
    ))
    if release:
        st = ev.steps["sysctl"]
        ev.steps["sysctl"] = Step(st.rc, re.sub(rb"kern\.osrelease: \S+", b"kern.osrelease: " + release.encode(), st.out))
    return ev


def test_ossl_reports_its_algorithms_not_its_description() -> None:
    s = assess(_with_ossl_loaded("freebsd-15.0-kvm-aliyun-builtin"), "h", "test")
    ossl = next(d for d in s.other_drivers if d.name == "ossl")
    assert ossl.state == "loaded" and ossl.attached is True
    assert "OpenSSL crypto" not in ossl.algorithms
    assert ossl.algorithms[:2] == ["AES-CBC", "AES-GCM"] and "ChaCha20-Poly1305" in ossl.algorithms
    assert "AES-XTS" not in ossl.algorithms and ossl.accelerates_aes is True


@pytest.mark.parametrize(
    ("release", "accelerates_aes"),
    [("13.0-RELEASE", False), ("13.0-STABLE", None), ("13.2-RELEASE", None), ("14.1-RELEASE", True)],
)
def test_ossl_does_aes_from_14_0(release: str, accelerates_aes: bool | None) -> None:
    s = assess(_with_ossl_loaded("freebsd-15.0-kvm-aliyun-builtin", release), "h", "test")
    ossl = next(d for d in s.other_drivers if d.name == "ossl")
    assert ossl.accelerates_aes is accelerates_aes
    assert ("AES-CBC" in ossl.algorithms) is bool(accelerates_aes)


def test_geli_hmac_must_be_done_by_the_same_driver_as_the_cipher() -> None:
    """aesni does AES-XTS, ossl does HMAC/SHA512: no single driver does both, so the provider stays in software."""
    ev = _with_ossl_loaded("freebsd-15.0-kvm-aliyun-builtin")
    ev.steps["geli_list"] = Step(0, _geli_list_with_auth("HMAC/SHA512"))
    s = assess(ev, "h", "test")
    soft = next(g for g in s.geli if g.name == "ada1p1.eli")
    assert soft.accelerable is False and not soft.needs_reattach
