"""`setkey -D` output -> SetkeyDump (the SAs' algorithm names, never their keys).

Format (lib/libipsec/pfkey_dump.c pfkey_sadump): an address line `SRC DST`, then tab-indented
`SATYPE mode=MODE spi=...`, `E: ALGO  KEYHEX...` (ESP), `A: ALGO  KEYHEX...`, `C: ALGO` (IPComp),
`seq=... replay=... flags=... state=STATE` and the lifetime lines. str_alg_enc names aes-cbc
(older setkey: rijndael-cbc), aes-ctr, aes-gcm-16, null...; an algorithm it has no name for is
printed as its number. The bsdcrypt probe keeps only the satype/mode, E:/A:/C: names and state
lines (tests/parsers/test_setkey.py reads both). sbin/setkey/setkey.c prints `No SAD entries.`
for an empty SAD and `pfkey_open: <strerror>` when the PF_KEY socket cannot be opened (EPERM
without root: keysock.c key_attach's priv_check; no PF_KEY family without IPsec in the kernel).
"""

from __future__ import annotations

import re

from bsdcrypt.facts import IpsecSA, SetkeyDump
from bsdcrypt.parsers import clean_text

_SA = re.compile(r"^(esp|ah|ipcomp|esp-udp|tcp)\s+mode=(\S+)")
_ALG = re.compile(r"^([EAC]):\s+(\S+)")
_STATE = re.compile(r"\bstate=(\w+)")
_OPEN = re.compile(r"^pfkey_open:\s*(.*)$")
_MAX_SAS = 100_000


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
            cur[m.group(1)] = m.group(2)  # C: (IPComp's compression) is kept but means no cipher
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


def needs_root(dump: SetkeyDump) -> bool:
    """pfkey_open failed for want of privilege (EPERM / EACCES)."""
    return dump.readable is False and dump.error in ("Operation not permitted", "Permission denied")


def no_pfkey(dump: SetkeyDump) -> bool:
    """pfkey_open failed because the kernel has no PF_KEY family: no IPsec compiled in or loaded."""
    return dump.readable is False and dump.error is not None and "not supported" in dump.error
