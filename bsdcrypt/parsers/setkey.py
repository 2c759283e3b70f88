"""`setkey -D` output -> SetkeyDump (the SAs' algorithm names, never their keys).

Format (lib/libipsec/pfkey_dump.c pfkey_sadump): an address line `SRC DST`, then tab-indented
`SATYPE mode=MODE spi=...`, `E: ALGO  KEYHEX...` (ESP), `A: ALGO  KEYHEX...`, `C: ALGO` (IPComp),
`seq=... replay=... flags=... state=STATE` and the lifetime lines. An algorithm the str_alg_enc /
str_alg_auth table has no name for is printed as its bare number (GETMSGV2S: `printf("%u ", num)`):
`esp_algorithm` below reads both. The bsdcrypt probe keeps only the satype/mode, E:/A:/C: names and
state lines (tests/parsers/test_consumers_parsers.py reads both forms). sbin/setkey/setkey.c prints `No SAD entries.`
for an empty SAD and `pfkey_open: <strerror>` when the PF_KEY socket cannot be opened (EPERM
without root: keysock.c key_attach's priv_check; no PF_KEY family without IPsec in the kernel).
"""

from __future__ import annotations

import re

from bsdcrypt.facts import IpsecSA, SetkeyDump
from bsdcrypt.parsers import clean_text, decimal

_SA = re.compile(r"^(esp|ah|ipcomp|esp-udp|tcp)\s+mode=(\S+)")
_ALG = re.compile(r"^([EAC]):\s+(\S+)")
_STATE = re.compile(r"\bstate=(\w+)")
_OPEN = re.compile(r"^pfkey_open:\s*(.*)$")
_MAX_SAS = 100_000
_MAX_NAME = 64

# What each FreeBSD setkey prints on an `E:` line, by the release of its lib/libipsec/pfkey_dump.c
# (str_alg_enc; the kernel's key.c supported_ealgs decides what an SA may use):
#   12.x / 13.x: none, des-cbc, 3des-cbc, null, cast128-cbc, blowfish-cbc, rijndael-cbc, aes-ctr,
#     aes-gcm-16, camellia-cbc (rc5-cbc/twofish-cbc only #ifdef'd, never defined by FreeBSD's header);
#   main after the RFC 8221 cleanup (14-CURRENT, 2021-22): none, null, aes-cbc, aes-ctr, aes-gcm-16;
#   main from commit 9f8f3a8e9ad4 (2022-11-02, "ipsec: add support for CHACHA20POLY1305"; in 14.0 and
#     later): the same plus chacha20-poly1305. That one commit taught the kernel (xform_esp.c, key.c)
#     and setkey (pfkey_dump.c, token.l) the algorithm together, so a setkey of the same release as its
#     kernel always names a ChaCha20-Poly1305 SA; only an older setkey (an older jail's userland) would
#     print its number, whose value no reachable copy of sys/net/pfkeyv2.h gave: it stays unknown.
# A number is printed for an algorithm the kernel accepts but setkey does not name. FreeBSD's
# sys/net/pfkeyv2.h (the 12.x-era header, `SADB_EALG_MAX 23 /* !!! keep updated !!! */`) gives the
# values; 23, SADB_X_EALG_AESGMAC (RFC 4543 + Errata1821, in key.c's supported_ealgs), is named by no
# pfkey_dump.c version, so an AES-GMAC SA always prints `E: 23`. The other values are the ones a setkey
# names; read as numbers they mean the same algorithm (a userland older than the kernel).
ESP_NUMBERS: dict[int, str] = {
    2: "des-cbc", 3: "3des-cbc", 6: "cast128-cbc", 7: "blowfish-cbc", 11: "null", 12: "aes-cbc",
    13: "aes-ctr", 20: "aes-gcm-16", 22: "camellia-cbc", 23: "aes-gmac",
}


def parse_setkey_dump(text: str) -> SetkeyDump:
    """Never raises; nothing recognisable reads `readable=None`."""
    sas: list[IpsecSA] = []
    cur: dict[str, str | None] | None = None
    empty = False
    error: str | None = None

    def close() -> None:
        if cur is not None and len(sas) < _MAX_SAS:
            sas.append(IpsecSA(
                satype=cur["satype"] or "", mode=cur.get("mode"), encryption=cur.get("E"),
                authentication=cur.get("A"), state=cur.get("state"),
            ))

    for raw in clean_text(text).splitlines():
        line = raw.strip()
        if m := _SA.match(line):
            close()
            cur = {"satype": m.group(1), "mode": m.group(2)}
        elif cur is not None and (m := _ALG.match(line)):
            # C: (IPComp's compression) is kept but means no cipher; a name is cut at _MAX_NAME (setkey's
            # are under 20 characters: a longer one is no algorithm bsdcrypt knows, and is not echoed whole)
            cur[m.group(1)] = m.group(2)[:_MAX_NAME]
            if s := _STATE.search(line):  # `C: none  seq=... state=larval` shares the line
                cur["state"] = s.group(1)
        elif cur is not None and (s := _STATE.search(line)):
            cur["state"] = s.group(1)
        elif line == "No SAD entries.":
            empty = True
        elif m := _OPEN.match(line):
            error = m.group(1).strip() or "error"
    close()
    if sas or empty:
        return SetkeyDump(readable=True, sas=tuple(sas))
    if error is not None:
        return SetkeyDump(readable=False, error=error)
    return SetkeyDump()


def is_number(printed: str | None) -> bool:
    """Whether an `E:`/`A:` value is a bare number (GETMSGV2S's `%u`): ASCII digits only."""
    return printed is not None and printed.isascii() and printed.isdigit()


def esp_algorithm(printed: str | None) -> str | None:
    """The setkey name of an `E:` value as printed: a name stays, a bare number becomes the name
    FreeBSD's pfkeyv2.h gives it (None: a number bsdcrypt cannot name, however long)."""
    if printed is None or not is_number(printed):
        return printed
    n = decimal(printed)
    return ESP_NUMBERS.get(n) if n is not None else None


def needs_root(dump: SetkeyDump) -> bool:
    """pfkey_open failed for want of privilege (EPERM / EACCES)."""
    return dump.readable is False and dump.error in ("Operation not permitted", "Permission denied")


def no_pfkey(dump: SetkeyDump) -> bool:
    """pfkey_open failed because the kernel has no PF_KEY family: no IPsec compiled in or loaded."""
    return dump.readable is False and dump.error is not None and "not supported" in dump.error
