"""`record --redact`: a recording fit for a public bug report (docs/recordings.md lists what is kept).

Kept: what bsdcrypt's own reading of a host needs. Masked:

* in the loader files, the value of every line bsdcrypt does not read (`password`, `bootlock_password`,
  `kern.geom.eli.passphrase`, a GELI keyfile's `_name`, `exec`...), every comment except enable's own
  marker, and the text of malformed lines; line numbers and line endings stay, so FILE:LINE still points
  at the same line;
* in every step: IPv4 and IPv6 addresses, MAC addresses, serial numbers, UUIDs, `diskid/DISK-<serial>`
  names, the kernel's build host (not FreeBSD's public builders), and the host's own names: in their
  places (kern.hostname, uname -a, dmesg's "Setting hostname:") always, and as words anywhere (paths and
  step names included) unless that changes bsdcrypt's reading of the recording (a host called `kvm` or
  `GENERIC`; `reading` tells).

Redacting a redacted recording changes nothing.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import replace

from bsdcrypt.loader.conf import files_from_evidence, is_marker
from bsdcrypt.parsers.loaderconf import Line, parse
from bsdcrypt.probe import CRYPTO_DRIVERS, Evidence, File, Step, StepName, file_step
from bsdcrypt.recording import Provenance, provenance_of, remember_replayed

REDACTED_HOST = "host.example"
MASK = b"redacted"
MASKED_COMMENT = b"# redacted"
MASKED_LINE = b"redacted line"  # a malformed line stays malformed (no "=")
IPV4_MASK = "192.0.2.1"  # RFC 5737 documentation addresses
IPV6_MASK = "2001:db8::1"  # RFC 3849

_DISKID = re.compile(rb"(diskid/DISK-)[^\s/.]+")  # GEOM names built from a disk's serial number
_UUID = re.compile(rb"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_MAC = re.compile(rb"\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b")
_SERIAL = re.compile(rb"(?i)(\b(?:serial(?:[ _]?number)?|hostuuid|uuid)\b\s*[:=]?\s*)(?!number)[^\s<>,]+")
_IPV4 = re.compile(rb"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\d)")
_IPV6 = re.compile(rb"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%[\w.]+)?(?![\w:])")

# Where the probe's outputs print a host's own name: replaced there whatever the name.
_KERN_HOSTNAME = re.compile(rb"^(kern\.hostname: )(\S+)", re.M)  # sysctl kern.hostname
_UNAME_NODENAME = re.compile(rb"\A(\S+ )([^\s]+)(?= )")  # uname -a: "%s %s %s ..." sysname nodename release
_SETTING_HOSTNAME = re.compile(rb"^((?:\[\d+\] )?Setting hostname: )(\S+?)(?=\.?\r?$)", re.M)  # rc.d/hostname
# The kernel's build host in kern.version, "    user@HOST:/usr/obj/..." (dmesg banner, uname -a): often the
# host itself, or another machine of the same network. Official FreeBSD builders are public and kept.
_BUILD_HOST_DMESG = re.compile(rb"^((?:\[\d+\] )?[ \t]+[\w.+-]*@)([^\s@:/]+)(?=:/)", re.M)
_BUILD_HOST_UNAME = re.compile(rb"(\s[\w.+-]*@)([^\s@:/]+)(?=:/)")
_PUBLIC_BUILDERS = (b".freebsd.org", b".daemonology.net")

# The loader variables bsdcrypt reads (bsdcrypt.loader.model), besides every `<module>_load` and every
# line of a crypto driver module (`aesni_name` changes what module_blacklist is checked against). A
# variable these values name (`${module_blacklist}`) is kept too: the loader expands it.
KEPT_VARIABLES = frozenset(
    {"loader_conf_files", "loader_conf_dirs", "local_loader_conf_files", "module_blacklist", "product_vars"}
)
_MODULE = re.compile(r"([-A-Za-z0-9_]+)_(load|name|type|flags|before|after|error)")
_REFERENCE = re.compile(r"\$\{([^}]+)\}|\$([A-Za-z0-9][-A-Za-z0-9_.]*)")

Reading = Callable[[Evidence], object]


def _build_host(match: re.Match[bytes]) -> bytes:
    host = match.group(2)
    if host.lower().endswith(_PUBLIC_BUILDERS):
        return match.group(0)
    return match.group(1) + REDACTED_HOST.encode()


def hostnames(evidence: Evidence, hostname: str) -> set[str]:
    """The names this host goes by: the one given, and what kern.hostname and uname -a say."""
    names = {hostname}
    st = evidence.step(StepName.SYSCTL)
    if st is not None:
        names.update(m.group(2).decode("utf-8", "replace") for m in _KERN_HOSTNAME.finditer(st.out))
    st = evidence.step(StepName.UNAME_A)
    if st is not None and st.ok:
        m = _UNAME_NODENAME.match(st.out)
        if m:
            names.add(m.group(2).decode("utf-8", "replace"))
    names = {n for n in names if n and n != REDACTED_HOST}
    return names | {n.split(".")[0] for n in names}


# ---- loader files ------------------------------------------------------------------------------------


def _read_by_bsdcrypt(name: str, kept: set[str]) -> bool:
    m = _MODULE.fullmatch(name)
    if m is not None and (m.group(2) == "load" or m.group(1) in CRYPTO_DRIVERS):
        return True
    return name in kept


def kept_variables(files: Iterable[bytes]) -> set[str]:
    """KEPT_VARIABLES and every variable a kept value names (to the end of the chain)."""
    lines = [ln for data in files for ln in parse(data) if ln.kind == "assign" and ln.name and ln.value is not None]
    kept = set(KEPT_VARIABLES)
    while True:
        more = {
            a or b
            for ln in lines
            if _read_by_bsdcrypt(ln.name or "", kept)
            for a, b in _REFERENCE.findall(ln.value or "")
        } - kept
        if not more:
            return kept
        kept |= more


def _masked_tail(tail: bytes) -> bytes:
    """What follows an assignment's value (closing quote, blanks, a comment): the comment masked unless it is
    enable's marker, which `disable` needs."""
    body, cr = (tail[:-1], b"\r") if tail.endswith(b"\r") else (tail, b"")
    at = body.find(b"#")
    if at < 0 or is_marker(body[at - 1:] if at else body) or body[at:] == MASKED_COMMENT:
        return tail
    return body[:at] + MASKED_COMMENT + cr


def _masked_line(line: Line, kept: set[str]) -> bytes:
    text = line.text
    cr = b"\r" if text.endswith(b"\r") else b""
    if line.kind == "blank":
        return text
    if line.kind == "comment":
        lead = text[: len(text) - len(text.lstrip(b" \t\v\f\r"))]
        body = text[len(lead):].rstrip(b"\r")
        return text if body in (b"#", MASKED_COMMENT) else lead + MASKED_COMMENT + cr
    if line.kind == "malformed" or line.name is None:
        return text if text.rstrip(b"\r") == MASKED_LINE else MASKED_LINE + cr
    head, value, tail = text[: line.value_start], text[line.value_start : line.value_end], text[line.value_end :]
    if not _read_by_bsdcrypt(line.name, kept) and value:
        value = MASK
    return head + value + _masked_tail(tail)


def mask_loader_file(data: bytes, kept: set[str]) -> bytes:
    """A loader file with what bsdcrypt does not read masked, line for line (numbers and endings kept)."""
    return b"\n".join(_masked_line(line, kept) for line in parse(data)) + (b"\n" if data.endswith(b"\n") else b"")


# ---- every step --------------------------------------------------------------------------------------


def _ipv4(match: re.Match[bytes]) -> bytes:
    text = match.group(0).decode("ascii")
    try:
        addr = ipaddress.IPv4Address(text)
    except ValueError:
        return match.group(0)  # 300.1.2.3: a version number, not an address
    if addr.is_loopback or addr.is_unspecified or text.startswith("255.") or addr in _V4_DOC:
        return match.group(0)  # loopback, 0.0.0.0 and netmasks name nobody
    return IPV4_MASK.encode()


def _ipv6(match: re.Match[bytes]) -> bytes:
    text = match.group(0).decode("ascii")
    addr_text = text.split("%")[0]
    if "::" not in addr_text and addr_text.count(":") != 7:
        return match.group(0)  # 12:34:56 is a time, not an address
    try:
        addr = ipaddress.IPv6Address(addr_text)
    except ValueError:
        return match.group(0)
    if addr.is_loopback or addr.is_unspecified or addr in _V6_DOC:
        return match.group(0)
    return IPV6_MASK.encode()


_V4_DOC = ipaddress.IPv4Network("192.0.2.0/24")
_V6_DOC = ipaddress.IPv6Network("2001:db8::/32")


def _everywhere(data: bytes) -> bytes:
    data = _MAC.sub(b"00:00:5e:00:53:00", data)
    data = _SERIAL.sub(rb"\1REDACTED", data)
    data = _DISKID.sub(rb"\1REDACTED", data)
    data = _UUID.sub(b"00000000-0000-0000-0000-000000000000", data)
    data = _IPV4.sub(_ipv4, data)
    return _IPV6.sub(_ipv6, data)


def _in_places(key: str, st: Step) -> bytes:
    host = REDACTED_HOST.encode()
    data = st.out
    if key == StepName.SYSCTL:
        data = _KERN_HOSTNAME.sub(lambda m: m.group(1) + host, data)
    elif key == StepName.UNAME_A and st.ok:
        data = _UNAME_NODENAME.sub(lambda m: m.group(1) + host, data, count=1)
        data = _BUILD_HOST_UNAME.sub(_build_host, data)
    elif key == file_step(File.DMESG_BOOT):
        data = _SETTING_HOSTNAME.sub(lambda m: m.group(1) + host, data)
        data = _BUILD_HOST_DMESG.sub(_build_host, data)
    return data


def _names_as_words(evidence: Evidence, names: set[str]) -> Evidence:
    """Every name replaced as a word (not inside a longer name: `fw1` in `fw10` or `fw1-old` stays) in
    every step's output and name."""
    word = re.compile(
        rb"(?<![\w.-])(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names, key=len, reverse=True))
        + rb")(?![\w-])"
    )
    host = REDACTED_HOST.encode()
    out: dict[str, Step] = {}
    for key, st in evidence.steps.items():
        new_key = word.sub(host, key.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
        if new_key in out or (new_key != key and new_key in evidence.steps):
            new_key = key  # two steps would become one: the name stays in this step's name
        out[new_key] = Step(st.rc, word.sub(host, st.out))
    return Evidence(out)


def mask_text(text: str) -> str:
    """Free text (a recording's comment header and `source`) with addresses, MACs and serials masked."""
    return _everywhere(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")


def redacted_provenance(evidence: Evidence) -> Provenance | None:
    """The provenance of replayed evidence with its header and source masked like the steps (a recording
    made over `ssh root@10.1.2.3` says so in its source), or None when it was not replayed."""
    origin = provenance_of(evidence)
    if origin is None:
        return None
    return replace(origin, header=mask_text(origin.header), source=mask_text(origin.source) if origin.source else None)


def redact(evidence: Evidence, hostname: str, reading: Reading | None = None) -> Evidence:
    """The evidence with what a public bug report must not show masked (see the module's text).

    `reading(evidence)`: bsdcrypt's reading of a host (the assessment, host name aside). The host's names
    are replaced as words everywhere only when that reading stays the same; without `reading` (or when it
    changes) only in their places.
    """
    loader = {file_step(path) for path, _ in files_from_evidence(evidence)}
    kept = kept_variables(st.out for key, st in evidence.steps.items() if key in loader)
    out: dict[str, Step] = {}
    for key, st in evidence.steps.items():
        data = _in_places(key, st)
        if key in loader:
            data = mask_loader_file(data, kept)
        out[key] = Step(st.rc, _everywhere(data))
    result = Evidence(out)
    names = {n for n in hostnames(evidence, hostname) if len(n) >= 2}
    if names and reading is not None:
        wider = _names_as_words(result, names)
        if wider.steps != result.steps and reading(wider) == reading(result):
            result = wider
    origin = provenance_of(evidence)
    if origin is not None:
        remember_replayed(result, origin)
    return result
