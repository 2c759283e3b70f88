"""Kernel crypto consumers (issue 27): for each, whether the host's AES driver accelerates it now.

GELI, ZFS native encryption, IPsec ESP, kernel TLS and OpenVPN DCO reach the kernel's AES code through
the OpenCrypto framework (OCF), which gives a session to a driver attached for its algorithm: aesni(4),
ossl(4) or armv8crypto(4), else cryptosoft (software). WireGuard (if_wg) runs its own ChaCha20-Poly1305
and never uses them. The verdict of each combines the CPU (AES-NI shown, hidden by a hypervisor,
absent), the drivers' state and algorithms, and the consumer's cipher. Reasoning: docs/findings.md.
"""

from __future__ import annotations

from dataclasses import replace

from bsdcrypt.assess.findings import CHACHA as ADVICE_CHACHA
from bsdcrypt.assess.ossl import ossl_unsettled
from bsdcrypt.assess.paste import with_consumer_gaps
from bsdcrypt.facts import CpuFeatures, KldFile
from bsdcrypt.parsers.ifgroup import parse_groups
from bsdcrypt.parsers.kldstat import file_containing, parse_kldstat
from bsdcrypt.parsers.ktls import parse_ktls
from bsdcrypt.parsers.setkey import esp_algorithm, is_number, needs_root, no_pfkey, parse_setkey_dump
from bsdcrypt.parsers.sysctl import parse_sysctl, unknown_oids
from bsdcrypt.parsers.zfs import parse_zfs_get
from bsdcrypt.platform import GUI_LOADED
from bsdcrypt.probe import SETKEY_MAX_LINES, ZFS_MAX_LINES, Evidence, Step, StepName
from bsdcrypt.status import ConsumerInfo, ConsumerItem, ConsumerVerdict, Finding, Status

AES_CIPHERS = frozenset({"AES-GCM", "AES-CCM", "AES-CBC", "AES-ICM", "AES-XTS"})
CHACHA = "ChaCha20-Poly1305"
# setkey(8)'s E: names (lib/libipsec/pfkey_dump.c str_alg_enc; rijndael-cbc is the older name of
# aes-cbc, aes-ctr is OCF's AES-ICM; chacha20-poly1305 from commit 9f8f3a8e, 14.0) and the names
# parsers/setkey.esp_algorithm gives the numbers setkey prints (aes-gmac: SADB_X_EALG_AESGMAC, 23) ->
# the OCF cipher.
ESP_CIPHERS = {
    "aes-gcm-16": "AES-GCM", "aes-cbc": "AES-CBC", "rijndael-cbc": "AES-CBC", "aes-ctr": "AES-ICM",
    "null": "NULL", "chacha20-poly1305": CHACHA, "des-cbc": "DES-CBC", "3des-cbc": "3DES-CBC",
    "blowfish-cbc": "Blowfish-CBC", "cast128-cbc": "CAST-128-CBC", "camellia-cbc": "Camellia-CBC",
    "aes-gmac": "AES-GMAC",
}
# AES ciphers whose path through the drivers FreeBSD's sources, as read, do not settle. AES-GMAC ESP
# (NULL encryption with AES-GMAC integrity, RFC 4543): 12.x aesni_newsession takes GMAC only together
# with AES-GCM (gcm_hash != gcm: EINVAL), and the 13.x+ xform_esp.c esp_init read sets an AEAD session
# up for SADB_X_EALG_AESGCM16 only; whether those kernels still accept ealg 23 was not read.
UNSETTLED_CIPHERS = {
    "AES-GMAC": "an AES-GMAC SA (RFC 4543): which driver takes it is not settled by FreeBSD's sources as read",
}
# The A: HMAC of a cipher+HMAC SA and the names under which a driver lists it (aesni: SHA1/SHA256 when
# the CPU has SHA extensions; ossl: SHA*-HMAC). One OCF session does cipher and HMAC together, so one
# driver must offer both, or the whole SA runs in software (as for GELI's authenticated providers).
ESP_AUTH = {
    "hmac-sha1": ("SHA1", "SHA1-HMAC"), "hmac-sha2-256": ("SHA256", "SHA2-256-HMAC"),
    "hmac-sha2-384": ("SHA2-384-HMAC",), "hmac-sha2-512": ("SHA2-512-HMAC",), "hmac-md5": (),
    "aes-xcbc-mac": (), "tcp-md5": (),
}
KINDS = ("geli", "zfs", "ipsec", "ktls", "ovpn-dco", "wireguard")
LABELS = {
    "geli": "GELI", "zfs": "ZFS encryption", "ipsec": "IPsec", "ktls": "kernel TLS", "ovpn-dco": "OpenVPN DCO",
    "wireguard": "WireGuard",
}
NOT_GATHERED = "not gathered (a recording or paste without this output)"
# Worst first: what one consumer's verdict is when its items differ.
_ORDER: tuple[ConsumerVerdict, ...] = ("software", "unknown", "accelerated", "not-affected", "not-in-use")


def zfs_cipher(encryption: str | None) -> str | None:
    """The OCF cipher of a ZFS `encryption` value (aes-128-ccm ... aes-256-gcm; zfs_prop.c)."""
    value = (encryption or "").lower()
    if value.startswith("aes-") and value.endswith("-gcm"):
        return "AES-GCM"
    if value.startswith("aes-") and value.endswith("-ccm"):
        return "AES-CCM"
    if value == "chacha20-poly1305":
        return CHACHA
    return None


def _attached(status: Status, features: CpuFeatures | None = None) -> list[tuple[str, set[str], frozenset[str]]]:
    """(name, algorithms it offers, algorithms it may offer: not settled) of each attached driver. Only
    ossl's list depends on the release (assess/ossl.py); the others print theirs at attach."""
    out = []
    for d in (status.driver, *status.other_drivers):
        if d.attached:
            maybe = ossl_unsettled(status.os, status.cpu, features) if d.name == "ossl" else frozenset()
            out.append((d.name or "?", set(d.algorithms), maybe - set(d.algorithms)))
    return out


def cipher_verdict(
    cipher: str | None, status: Status, auth: str | None = None, features: CpuFeatures | None = None
) -> tuple[ConsumerVerdict, str | None, str]:
    """(verdict, driver, why) for a session of `cipher` (+ the HMAC `auth`, a setkey A: name) now.
    `features`: the boot's CPU features (ossl's amd64 AES-GCM depends on them)."""
    if cipher is None:
        return "unknown", None, "its cipher is not one bsdcrypt knows"
    if cipher in UNSETTLED_CIPHERS:
        return "unknown", None, UNSETTLED_CIPHERS[cipher]
    if cipher not in AES_CIPHERS:
        return "not-affected", None, f"{cipher} does not use the AES drivers"
    needs = ESP_AUTH.get(auth) if auth else None
    if auth and needs is None:
        return "unknown", None, f"its HMAC {auth} is not one bsdcrypt knows"
    partial: str | None = None
    maybe: str | None = None
    attached = _attached(status, features)
    for name, algos, unsettled in attached:
        if not algos:
            continue
        has_auth = needs is None or any(n in algos for n in needs)
        if cipher in algos and has_auth:
            return "accelerated", name, f"{name}0 offers {cipher}" + (f" with {auth}" if auth else "")
        if (cipher in algos or cipher in unsettled) and (has_auth or any(n in unsettled for n in needs or ())):
            # ossl on a release whose sources were not reachable (13.1-13.x ...): it may offer it
            maybe = maybe or (f"whether {name}0 offers {cipher} on {status.os.release or 'this release'} "
                              "is not settled by the FreeBSD sources bsdcrypt could read")
        elif cipher in algos:
            partial = f"{name}0 offers {cipher} but not {auth}: one session does both, so all of it runs in software"
        elif any(a.startswith("AES") for a in algos) and partial is None:
            partial = f"{name}0 offers no {cipher} ({','.join(sorted(a for a in algos if a.startswith('AES')))})"
    if any(not algos for _, algos, _ in attached):
        return "unknown", None, "an attached driver's algorithms are not shown"
    if maybe:
        return "unknown", None, maybe
    if partial:
        return "software", None, partial
    cpu, d = status.cpu, status.driver
    if cpu.aesni is False:
        why = f"this {cpu.hypervisor or 'VM'} guest's CPU hides AES-NI" if cpu.vm else "the CPU has no AES instructions"
        return "software", None, why
    if d.state in ("not-loaded", "missing", "no-device") and cpu.aesni:
        return "software", None, f"{d.name} is {d.state}"
    if d.name is None and d.state == "missing":
        return "software", None, "no kernel AES driver exists for this architecture"
    if d.state in ("not-loaded", "missing") and cpu.aesni is None:
        return "unknown", None, f"{d.name} is {d.state} and whether the CPU has AES instructions is not known"
    return "unknown", None, d.reason or f"the state of {d.name or 'the AES driver'} is not known"


def _worst(items: list[ConsumerItem]) -> ConsumerVerdict:
    live = [i.verdict for i in items if i.verdict != "not-in-use"]
    return min(live, key=_ORDER.index) if live else "not-in-use"


def _step(ev: Evidence, name: str) -> Step | None:
    return ev.step(name)


def _cut(ev: Evidence, st: Step, max_lines: int) -> str | None:
    """Why the list may be longer than shown: the probe keeps at most `max_lines` lines of it (`head -n`),
    so a collected output of that many lines may have been cut. None when it was not (or was pasted)."""
    if ev.origin == "paste" or st.text.count("\n") < max_lines:
        return None
    return f"the probe keeps {max_lines} lines of this list: there may be more"


def _at_least(verdict: ConsumerVerdict, cut: str | None) -> ConsumerVerdict:
    """A cut list's verdict: what is shown, unless the unshown rest could be worse (then unknown)."""
    return verdict if cut is None or _ORDER.index(verdict) <= _ORDER.index("unknown") else "unknown"


def _kld(ev: Evidence) -> list[KldFile]:
    st = ev.step(StepName.KLDSTAT_V)
    return parse_kldstat(st.text) if st is not None else []


def _loaded(kld: list[KldFile], name: str) -> bool | None:
    """Whether kldstat -v shows `name`.ko (or the module) loaded; None without kldstat."""
    if not kld:
        return None
    return any(f.name == f"{name}.ko" for f in kld) or file_containing(kld, name) is not None


def consumers(
    ev: Evidence, status: Status, features: CpuFeatures | None = None, kld: list[KldFile] | None = None
) -> list[ConsumerInfo]:
    """The six consumers, in KINDS order, each with a verdict (never more than the evidence shows).
    `features`: the boot's CPU features (dmesg.boot), which ossl's AES-GCM on amd64 depends on; `kld`:
    kldstat -v as the parse stage read it (read here when not given)."""
    if kld is None:
        kld = _kld(ev)
    st = _step(ev, StepName.TUNNEL_GROUPS)
    groups = parse_groups(st.text) if st is not None else None  # read once, for DCO and WireGuard
    return [_geli(ev, status), _zfs(ev, status, features), _ipsec(ev, status, kld, features),
            _ktls(ev, status, features), _ovpn(status, groups, kld, features), _wireguard(groups, kld)]


def _geli(ev: Evidence, status: Status) -> ConsumerInfo:
    items: list[ConsumerItem] = []
    for g in status.geli:
        cipher = (g.encryption or "").upper() or None
        alg = " ".join(str(x) for x in (g.encryption, g.key_length) if x) or None
        verdict: ConsumerVerdict
        if cipher and cipher not in AES_CIPHERS:
            verdict, why = "not-affected", f"{g.encryption} does not use the AES drivers"
        elif g.accelerated is True:
            verdict, why = "accelerated", f"geli list says Crypto: {g.crypto}"
        elif g.accelerated is False:
            verdict, why = "software", "geli list says Crypto: software" + (
                " (attached before the driver: detach and attach it again)" if g.needs_reattach else "")
        else:
            verdict, why = "unknown", f"geli list says Crypto: {g.crypto or 'nothing'}"
        items.append(ConsumerItem(g.name, alg, cipher, verdict, state=g.crypto, why=why))
    if not items and ev.step(StepName.GELI_LIST) is None:
        # a paste without `geli list` (the providers attached at boot, from dmesg.boot, are in status.geli)
        return ConsumerInfo("geli", None, "unknown", "GELI providers: unknown", reason=NOT_GATHERED)
    if not items:
        return ConsumerInfo("geli", False, "not-in-use", "no GELI provider attached")
    return ConsumerInfo("geli", True, _worst(items), f"{len(items)} provider(s)", items=items)


def _zfs(ev: Evidence, status: Status, features: CpuFeatures | None = None) -> ConsumerInfo:
    st = _step(ev, StepName.ZFS_CRYPTO)
    if st is None:
        return ConsumerInfo("zfs", None, "unknown", "encrypted datasets: unknown", reason=NOT_GATHERED)
    if st.rc == 127:
        return ConsumerInfo("zfs", False, "not-in-use", "no zfs command")
    datasets = [d for d in parse_zfs_get(st.text) if d.encryption not in (None, "off")]
    if st.rc != 0 and not datasets:
        return ConsumerInfo("zfs", None, "unknown", "encrypted datasets: unknown",
                            reason=f"zfs get failed (exit {st.rc}): run `zfs get encryption,keystatus`")
    if not datasets and ev.origin != "paste" and (said := _zfs_error(st.text)):
        # the probe keeps only encrypted datasets' lines (and exits 0 whatever zfs did): any other line is
        # zfs's or the shell's error (a jail without /dev/zfs ...), which proves no absence
        return ConsumerInfo("zfs", None, "unknown", "encrypted datasets: unknown",
                            reason=f"zfs get failed: {said}")
    if not datasets and ev.origin == "paste":
        # a pasted `zfs get` may name some datasets only (or pass through grep): the others are unknown
        return ConsumerInfo("zfs", None, "unknown", "no encrypted dataset among those pasted",
                            reason="run `zfs get -t filesystem,volume encryption,keystatus` for all of them")
    if not datasets:
        return ConsumerInfo("zfs", False, "not-in-use", "no encrypted dataset")
    items: list[ConsumerItem] = []
    for d in datasets:
        cipher = zfs_cipher(d.encryption)
        verdict, by, why = cipher_verdict(cipher, status, features=features)
        if d.keystatus == "unavailable":
            why = f"key not loaded; once loaded: {verdict}" + (f" ({why})" if why else "")
            verdict, by = "not-in-use", None
        items.append(ConsumerItem(d.name, d.encryption, cipher, verdict, by=by, state=d.keystatus, why=why))
    live = sum(1 for i in items if i.verdict != "not-in-use")
    cut = _cut(ev, st, ZFS_MAX_LINES)
    return ConsumerInfo("zfs", True, _at_least(_worst(items), cut),
                        f"{'at least ' if cut else ''}{len(items)} encrypted dataset(s), {live} with the key loaded",
                        reason=cut, items=items)


def _zfs_error(text: str) -> str | None:
    """The first line of a probe's zfs_crypto text that is no dataset line (zfs's error), cut short."""
    for line in text.splitlines():
        if line.strip() and not parse_zfs_get(line):
            return line.strip()[:120]
    return None


def _ipsec_in_kernel(ev: Evidence, kld: list[KldFile]) -> bool | None:
    st = _step(ev, StepName.SYSCTL_IPSEC)
    if st is not None:
        if "net.inet.ipsec.def_policy" in parse_sysctl(st.text):
            return True
        if "net.inet.ipsec.def_policy" in unknown_oids(st.text):
            # the leaf comes with sys/netipsec (options IPSEC or ipsec.ko): no IPsec in this kernel now
            return False
    if _loaded(kld, "ipsec"):
        return True
    return None


def _ipsec(ev: Evidence, status: Status, kld: list[KldFile], features: CpuFeatures | None = None) -> ConsumerInfo:
    in_kernel = _ipsec_in_kernel(ev, kld)
    st = _step(ev, StepName.SETKEY_SAD)
    dump = parse_setkey_dump(st.text) if st is not None else None
    if dump is not None and no_pfkey(dump) and in_kernel is None:
        in_kernel = False  # no PF_KEY family: netipsec is neither compiled in nor loaded
    if in_kernel is False:
        return ConsumerInfo("ipsec", False, "not-in-use", "IPsec is not in the kernel")
    if dump is None or dump.readable is None:
        what = "IPsec is in the kernel" if in_kernel else "IPsec: unknown"
        reason = NOT_GATHERED if st is None else "setkey -D printed nothing bsdcrypt reads"
        return ConsumerInfo("ipsec", True if in_kernel else None, "unknown", what + "; its SAs were not read",
                            reason=reason)
    if dump.readable is False:
        why = ("`setkey -D` needs root: run it as root (or `bsdcrypt status` as root) to see the SAs' algorithms"
               if needs_root(dump) else f"setkey -D failed: {dump.error}")
        return ConsumerInfo("ipsec", True if in_kernel else None, "unknown",
                            "IPsec is in the kernel; its SAs' algorithms were not readable"
                            if in_kernel else "IPsec SAs not readable", reason=why)
    groups: dict[tuple[str, str | None, str | None], list[str | None]] = {}
    for sa in dump.sas:
        if sa.satype in ("esp", "esp-udp", "ah"):
            groups.setdefault((sa.satype, sa.encryption, sa.authentication), []).append(sa.state)
    if not groups:
        return ConsumerInfo("ipsec", False, "not-in-use", "IPsec is in the kernel; no SA now")
    items: list[ConsumerItem] = []
    for (satype, enc, auth), states in groups.items():
        verdict: ConsumerVerdict
        if satype == "ah":
            cipher: str | None = None
            verdict, by, why = "not-affected", None, "AH authenticates only: no AES cipher"
        else:
            name_of = esp_algorithm(enc)  # setkey's name, or the name of the number it printed
            cipher = ESP_CIPHERS.get(name_of or "")
            # an AEAD (AES-GCM, ChaCha20-Poly1305) SA has no A: line; a cipher+HMAC SA needs both in one driver
            verdict, by, why = cipher_verdict(cipher, status, auth if cipher in AES_CIPHERS else None, features)
            if is_number(enc):
                why = (f"setkey printed algorithm number {enc}, {name_of} in FreeBSD's pfkeyv2.h; {why}" if name_of
                       else f"setkey printed algorithm number {enc}, which no FreeBSD pfkeyv2.h value bsdcrypt "
                       "knows names")
        alg = " + ".join(x for x in (enc, auth) if x) or None
        name = f"{len(states)} {satype.upper()} SA" + ("s" if len(states) > 1 else "")
        state = ",".join(sorted({s for s in states if s}))
        items.append(ConsumerItem(name, alg, cipher, verdict, by=by, state=state or None, why=why))
    cut = _cut(ev, st, SETKEY_MAX_LINES) if st is not None else None
    return ConsumerInfo("ipsec", True, _at_least(_worst(items), cut),
                        f"{'at least ' if cut else ''}{len(dump.sas)} SA(s)", reason=cut, items=items)


def _ktls(ev: Evidence, status: Status, features: CpuFeatures | None = None) -> ConsumerInfo:
    st = _step(ev, StepName.SYSCTL_KTLS)
    if st is None:
        return ConsumerInfo("ktls", None, "unknown", "kernel TLS: unknown", reason=NOT_GATHERED)
    k = parse_ktls(st.text)
    if k.present is False:
        return ConsumerInfo("ktls", False, "not-in-use", "this kernel has no KTLS (kern.ipc.tls)")
    if k.present is None:
        return ConsumerInfo("ktls", None, "unknown", "kernel TLS: unknown",
                            reason="sysctl kern.ipc.tls printed nothing bsdcrypt reads")
    items: list[ConsumerItem] = []
    names = {"cbc": "AES-CBC", "gcm": "AES-GCM", "chacha20": CHACHA}
    for path, counts in k.sessions.items():
        for key, n in counts.items():
            if not n:
                continue
            cipher = names[key]
            verdict: ConsumerVerdict
            if path == "sw":
                # sys/opencrypto/ktls_ocf.c ktls_ocf_try: AES-GCM and ChaCha20-Poly1305 are one AEAD session;
                # AES-CBC (TLS 1.0-1.2, transmit only) is two: a CSP_MODE_CIPHER session for AES-CBC and a
                # separate CSP_MODE_DIGEST one for its HMAC, each given to whichever driver takes it
                verdict, by, why = cipher_verdict(cipher, status, features=features)
                if key == "cbc":
                    why += "; " + _ktls_hmac(status, features)
                label = "software (OCF)"
            else:
                verdict = "not-affected" if cipher == CHACHA else "accelerated"
                by, why = path, f"encrypted by the NIC ({path}), not by a kernel driver"
                label = "NIC (ifnet)" if path == "ifnet" else "TOE"
            items.append(ConsumerItem(f"{n} {label} session" + ("s" if n > 1 else ""), f"TLS {cipher}", cipher,
                                      verdict, by=by, state=str(n), why=why))
    enabled = {True: "enabled", False: "disabled", None: "enable not shown"}[k.enabled]
    if items:
        return ConsumerInfo("ktls", True, _worst(items), f"kernel TLS {enabled}", items=items)
    would, by, why = cipher_verdict("AES-GCM", status, features=features)
    would_be = f"; AES-GCM sessions would be {would}" + (f" by {by}" if by else f" ({why})") if k.enabled else ""
    if "sw" not in k.sessions:
        # kern.ipc.tls.* proves a KTLS kernel, but without kern.ipc.tls.sw.* the software (OCF) sessions,
        # the ones the AES drivers serve, were not shown (a real excerpt held only ifnet lines; a
        # `sysctl kern.ipc.tls.enable=1` line holds none): unknown, not "no session"
        return ConsumerInfo("ktls", k.enabled, "unknown", f"kernel TLS {enabled}, its software sessions not shown"
                            + would_be, reason="`sysctl kern.ipc.tls.sw` lists the software (OCF) sessions per cipher")
    detail = f"kernel TLS {enabled}, no session now" + would_be
    return ConsumerInfo("ktls", k.enabled, "not-in-use", detail)  # enable not shown: None, not "off"


# The HMACs a KTLS AES-CBC session may use (ktls_ocf_try: CRYPTO_SHA1_HMAC, CRYPTO_SHA2_256_HMAC,
# CRYPTO_SHA2_384_HMAC) and the names under which a driver lists each: aesni prints SHA1/SHA256 when the
# CPU has SHA extensions (aesni_auth_supported: SHA1, SHA2-224, SHA2-256 and their HMACs, never
# SHA2-384); ossl lists them all (assess/ossl.py).
KTLS_HMACS = (("HMAC-SHA1", ("SHA1", "SHA1-HMAC")), ("HMAC-SHA256", ("SHA256", "SHA2-256-HMAC")),
              ("HMAC-SHA384", ("SHA2-384-HMAC",)))


def _ktls_hmac(status: Status, features: CpuFeatures | None) -> str:
    """Who computes a KTLS CBC session's HMAC: kern.ipc.tls.sw.cbc does not say which HMAC the
    sessions use, so each possible one is named with the driver that would take it."""
    attached = _attached(status, features)
    if any(not algos for _, algos, _ in attached):
        return "its HMAC's driver is not known (an attached driver's algorithms are not shown)"
    parts = []
    for label, names in KTLS_HMACS:
        by = next((n for n, algos, _ in attached if any(x in algos for x in names)), None)
        parts.append(f"{label} by {by}0" if by else f"{label} in software")
    return "its HMAC is a separate session (the counter does not say which): " + ", ".join(parts)


def _ovpn(
    status: Status, listed: dict[str, list[str]] | None, kld: list[KldFile], features: CpuFeatures | None = None
) -> ConsumerInfo:
    groups = listed or {}
    ifaces = groups.get("openvpn")
    loaded = _loaded(kld, "if_ovpn")
    major = status.os.major
    if major is not None and major < 14 and not loaded:
        # if_ovpn(4) arrived in FreeBSD 14.0: a 12.x/13.x kernel has no DCO, whatever was not gathered;
        # members of group openvpn there are pfSense's tun(4)-based OpenVPN interfaces (openvpn.inc)
        tun = f" ({len(ifaces)} OpenVPN interface(s) over tun/tap)" if ifaces else ""
        return ConsumerInfo("ovpn-dco", False, "not-in-use", f"no OpenVPN DCO (if_ovpn arrived in FreeBSD 14.0){tun}")
    if ifaces is None and loaded is None:
        return ConsumerInfo("ovpn-dco", None, "unknown", "OpenVPN DCO: unknown", reason=NOT_GATHERED)
    if ifaces is None:  # only kldstat: a module loaded says nothing of tunnels now
        return ConsumerInfo("ovpn-dco", None, "unknown", "if_ovpn.ko loaded" if loaded else "OpenVPN DCO: unknown",
                            reason="the openvpn interface group was not listed: `ifconfig -g openvpn`")
    # pfSense puts its tun(4)/tap(4)-based OpenVPN interfaces in group openvpn too; they are also in the
    # group of their own cloner (tun, tap), if_ovpn's never are (a layer-3 cloner named "openvpn")
    over_tun = {i for g in ("tun", "tap") for i in groups.get(g, [])}
    dco = [i for i in ifaces if i not in over_tun]
    # told apart when tun and tap were listed; without them only the appliances that group their own
    # OpenVPN interfaces (pfSense's openvpn.inc; OPNsense's "OpenVPN" rule group) leave it open: on
    # FreeBSD itself group openvpn is if_ovpn's cloner group (inferred: an admin could add any interface)
    told = ("tun" in groups and "tap" in groups) or status.os.variant not in GUI_LOADED
    if not dco:
        extra = f" ({len(ifaces)} OpenVPN interface(s) over tun/tap)" if ifaces else ""
        return ConsumerInfo("ovpn-dco", False, "not-in-use", "no OpenVPN DCO interface" + extra)
    would, by, why = cipher_verdict("AES-GCM", status, features=features)
    items = [ConsumerItem(
        i, "AES-GCM or ChaCha20-Poly1305 (the negotiated data cipher is not shown)", None, "unknown",
        why=f"if AES-GCM: {would}" + (f" by {by}" if by else f" ({why})") + f"; {CHACHA}: not affected",
    ) for i in dco]
    if told:
        return ConsumerInfo("ovpn-dco", True, "unknown", f"{len(dco)} DCO interface(s)",
                            reason="OpenVPN's status or log names the data cipher", items=items)
    return ConsumerInfo("ovpn-dco", None, "unknown", f"{len(dco)} interface(s) in group openvpn",
                        reason="DCO or pfSense's OpenVPN over tun/tap: `ifconfig -g tun; ifconfig -g tap` tells "
                        "(their members are not DCO)", items=items)


def _wireguard(groups: dict[str, list[str]] | None, kld: list[KldFile]) -> ConsumerInfo:
    ifaces = groups.get("wg") if groups is not None else None
    loaded = _loaded(kld, "if_wg")
    if ifaces:
        items = [ConsumerItem(i, CHACHA, CHACHA, "not-affected", why="WireGuard uses its own ChaCha20-Poly1305")
                 for i in ifaces]
        return ConsumerInfo("wireguard", True, "not-affected", f"{len(ifaces)} interface(s); never uses AES",
                            items=items)
    if ifaces is None and not loaded:
        return ConsumerInfo("wireguard", None, "unknown", "WireGuard: unknown", reason=NOT_GATHERED)
    return ConsumerInfo("wireguard", bool(loaded) if ifaces is None else False, "not-affected",
                        "if_wg.ko loaded; never uses AES" if loaded else "no WireGuard interface")


def in_use_with_aes(status: Status) -> list[str]:
    """The consumers found that use AES now, for advice that names them ("IPsec (4 ESP SAs)")."""
    out = []
    for c in status.consumers:
        items = [i for i in c.items if i.cipher in AES_CIPHERS and i.verdict != "not-in-use"]
        if items:
            out.append(f"{LABELS[c.kind]} ({', '.join(i.name for i in items[:3])}"
                       + (f" and {len(items) - 3} more" if len(items) > 3 else "") + ")")
    return out


def findings(status: Status) -> list[Finding]:
    """Consumer findings, what is affected now first. GELI has its own (geli-software ...)."""
    out: list[Finding] = []
    slow = [(c, i) for c in status.consumers if c.kind != "geli" for i in c.items if i.verdict == "software"]
    if slow:
        names = "; ".join(f"{LABELS[c.kind]}: {i.name} {i.algorithm or ''}".rstrip() for c, i in slow[:6])
        if len(slow) > 6:
            names += f"; and {len(slow) - 6} more"
        why = slow[0][1].why or ""
        out.append(Finding(
            "consumer-aes-software", "warning",
            f"Kernel AES runs in software now for: {names} ({why}).", _remedy(status, why),
        ))
    for c in status.consumers:
        if c.kind == "ipsec" and c.present and c.verdict == "unknown" and c.reason and "root" in c.reason:
            out.append(Finding(
                "ipsec-sas-unreadable", "info",
                "IPsec is in the kernel, but its SAs' algorithms were not readable without root: whether AES-NI "
                "accelerates them is not known.",
                "As root: `setkey -D | grep -E '^[[:space:]]*[EA]:'` (or run `bsdcrypt status` as root).",
            ))
    return out


def _remedy(status: Status, why: str) -> str:
    d, cpu = status.driver, status.cpu
    chacha = ("meanwhile prefer ChaCha20-Poly1305 where the protocol allows (TLS 1.3 for KTLS, WireGuard instead of "
              "an AES tunnel)")
    if cpu.aesni is False and cpu.vm:
        return ("Ask the provider to pass AES-NI through to the VM (CPU type host); no kernel driver can use "
                "instructions the VM hides (`bsdcrypt userland` helps userland OpenSSL only); " + chacha + ".")
    if cpu.aesni is False:
        return "Nothing to load: the CPU has no AES instructions; " + chacha + "."
    if d.state in ("not-loaded", "no-device", "missing") and cpu.aesni:
        return (f"Load {d.name} (`bsdcrypt enable --persist`, or the appliance's crypto setting), then renew the "
                "sessions made before it: rekey the IPsec SAs, reconnect KTLS clients.")
    if "offers no" in why or "but not" in why:
        return ("Use a cipher the driver offers: AES-GCM (an AEAD needs no separate HMAC) for new SAs and datasets "
                "(ZFS: aes-256-gcm), or load ossl(4) (`kldload ossl`, `ossl_load=\"YES\"`) where it offers it.")
    return "Check the driver with `bsdcrypt status` as root; " + chacha + "."


def add_consumers(
    ev: Evidence, status: Status, features: CpuFeatures | None = None, kld: list[KldFile] | None = None
) -> Status:
    """The one hook (assess/__init__.py): the consumers of a FreeBSD-family host and their findings,
    placed before the others (they say what is slow now). Linux and unknown systems get none."""
    if status.os.name == "Linux" or any(f.id == "unknown-os" for f in status.findings):
        return status
    status.consumers = consumers(ev, status, features, kld)
    # a paste's paste-partial finding names the consumer outputs it lacks (assess/paste.py)
    status.findings = findings(status) + [
        with_consumer_gaps(_named(status, f), ev, status.consumers) for f in status.findings]
    return status


# The findings of a host whose kernel AES stays slow, whose ChaCha20-Poly1305 advice names what was found.
_SLOW_AES = ("vm-hides-aesni", "cpu-no-aesni", "aes-disabled-in-firmware")
USERLAND_TRIAL = (
    " Userland OpenSSL (sshd, TLS services): `bsdcrypt userland` -- its trial shows whether the AES instructions "
    "still execute (under hardware virtualisation they usually do: only the flag is hidden), then sets "
    "OPENSSL_ia32cap per service."
)


def chacha_advice(status: Status) -> str | None:
    """The ChaCha20-Poly1305 advice naming the consumers and services this host runs AES in (None: none
    found). ZFS and GELI are left out: they offer no other cipher than AES here."""
    users = [u for u in in_use_with_aes(status) if not u.startswith(("ZFS", "GELI"))]
    users += [f"{LABELS[c.kind]} ({', '.join(i.name for i in c.items[:3])})" for c in status.consumers
              if c.kind == "ovpn-dco" and c.present]
    services = sorted({s.binary.rsplit("/", 1)[-1] for s in status.userland_aes.services or [] if s.libcrypto})
    if services:
        users.append("the services " + ", ".join(services) + " (TLS: prefer ChaCha20 in the cipher order; SSH: "
                     "chacha20-poly1305@openssh.com)")
    if not users:
        return None
    return "prefer ChaCha20-Poly1305 for what this host runs with AES: " + "; ".join(users) + \
        " (AES without AES-NI is several times slower)"


def _named(status: Status, f: Finding) -> Finding:
    if f.id not in _SLOW_AES:
        return f
    remedy = f.remedy
    named = chacha_advice(status)
    if named:
        remedy = remedy.replace(ADVICE_CHACHA, named).replace(ADVICE_CHACHA[0].upper() + ADVICE_CHACHA[1:],
                                                              named[0].upper() + named[1:])
    if f.id == "vm-hides-aesni" and "bsdcrypt userland" not in remedy:
        remedy += USERLAND_TRIAL
    return replace(f, remedy=remedy)
