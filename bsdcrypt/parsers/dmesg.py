"""dmesg / /var/run/dmesg.boot / /var/log/messages kernel lines -> DmesgBoot of the LAST boot.

Formats read from FreeBSD sources:
  x86 identcpu.c   "CPU: %s (%ld.%02ld-MHz %s-class CPU)", "\\n  Features2=0x%b",
                   "Structured Extended Features=0x%b", "Hypervisor: Origin = \\"%s\\""
                   (%b prints 0x<hex><NAME,...>; unknown bits print as "<bN>" inside the list)
  arm64 identcpu.c "CPU%3d: %s %s r%dp%d" + " affinity:", "%29s = <...>" with
                   "Instruction Set Attributes 0"
  aesni.c          "aesni0: <desc>" (newbus attach), "No AES or SHA support." (12+),
                   "No AESNI support." / "No SSE4.1 support." (older)
"""

from __future__ import annotations

import re

from bsdcrypt.facts import CpuFeatures, DmesgBoot, DriverMessage
from bsdcrypt.parsers import clean_text

DRIVERS = ("aesni", "armv8crypto", "ossl", "padlock")

_BOOT_MARK = "---<<BOOT>>---"
_MSGBUF = re.compile(r"^\[\d+\] ?")
_SYSLOG_TIME = re.compile(r"^[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d ")
_SYSLOG_TAG = re.compile(r"([^\s:\[]+)(?:\[\d+\])?: ?")
_COPYRIGHT = re.compile(r"^Copyright \(c\) .*\bProject\.?\s*$")
_BANNER = re.compile(r"^(\w*BSD) (\d+\.\d+\S*)")
_CPU_X86 = re.compile(r"^CPU: (.*?)\s*(?:\(\d+(?:\.\d+)?-MHz [^()]*-class CPU\))?\s*$")
_CPU_ARM = re.compile(r"^CPU\s*0: (.*?)(?:\s+affinity:.*)?$")
_BITFIELD = re.compile(r"^(Features2|Structured Extended Features|Structured Extended Features2)"
                       r"=0x[0-9a-fA-F]+<(.*)$")
_BITFIELD_PREFIXES = ("Features2=", "Structured Extended Features")
_ISA0 = re.compile(r"^Instruction Set Attributes 0 = <(.*)$")
_HYPERVISOR = re.compile(r'^Hypervisor: Origin = "(.*)"\s*$')
_DRIVER = re.compile(r"^(" + "|".join(DRIVERS) + r")(\d+): (.*?)\s*$")
# First characters of every line the loop in parse_dmesg looks at after the banner:
# HardenedBSD/Hypervisor, Copyright/CPU, Features2, Structured, Instruction, and the drivers.
_FIRST_CHARS = frozenset("HCFSI" + "".join(d[0] for d in DRIVERS))
_MAX_WRAP = 6  # continuation lines joined onto a wrapped bit-field line


def _kernel_lines(text: str) -> list[str]:
    """Lines of kernel output with msgbuf/syslog prefixes removed; other syslog lines dropped."""
    out: list[str] = []
    for raw in clean_text(text).splitlines():
        # The regexes only run on lines that can match them (a msgbuf prefix starts with "[",
        # a syslog time stamp with "Mmm " ): most lines of a dmesg.boot cost no regex at all.
        line = _MSGBUF.sub("", raw, count=1) if raw[:1] == "[" else raw
        tagged = _syslog(line) if line[3:4] == " " and "A" <= line[:1] <= "Z" else None
        if tagged is not None:
            tag, line = tagged
            if tag != "kernel":
                continue
        out.append(line.rstrip())
    return out


def _syslog(line: str) -> tuple[str, str] | None:
    """(program, message) of a syslogd line `Mon DD HH:MM:SS host prog[pid]: msg`, else None."""
    m = _SYSLOG_TIME.match(line)
    if not m:
        return None
    rest = line[m.end():]
    host_and_msg = rest[1:] if rest.startswith(" ") else rest.split(" ", 1)[-1]  # host may be empty
    for cand in (host_and_msg, rest):
        t = _SYSLOG_TAG.match(cand)
        if t:
            return t.group(1), cand[t.end():]
    return None


def _boot_starts(lines: list[str]) -> list[int]:
    """Indexes where a boot starts.

    A `---<<BOOT>>---` marker starts a boot; so does a copyright banner, unless it is the first
    banner after a marker (KDB/WARNING lines may sit in between) or continues a banner group.
    """
    starts: list[int] = []
    banner_in_boot = False
    # Only lines holding a marker or "Copyright" can start a boot; the rest are skipped at C speed.
    for i in [i for i, line in enumerate(lines) if _BOOT_MARK in line or "Copyright" in line]:
        s = lines[i].strip()
        if _BOOT_MARK in s:
            starts.append(i)
            banner_in_boot = False
        elif s.startswith("Copyright") and _COPYRIGHT.match(s) and not _prev_text(lines, i).startswith("Copyright"):
            if banner_in_boot or not starts:
                starts.append(i)
            banner_in_boot = True
    return starts


def _prev_text(lines: list[str], i: int) -> str:
    """The last non-blank line before lines[i], stripped ("" if none)."""
    for j in range(i - 1, -1, -1):
        s = lines[j].strip()
        if s:
            return s
    return ""


def _names(body: str) -> frozenset[str]:
    """The NAME,NAME list of a %b bit field (body is what follows the opening '<')."""
    end = body.rfind(">")
    if end >= 0:
        body = body[:end]
    return frozenset(n.strip() for n in body.split(",") if n.strip())


def _isa_names(body: str) -> frozenset[str]:
    """arm64 ID register fields; "AES+PMULL" also yields "AES" and "PMULL"."""
    names = set(_names(body))
    for n in list(names):
        if "+" in n and " " not in n:
            names.update(p for p in n.split("+") if p)
    return frozenset(names)


def _join_wrapped(lines: list[str], i: int) -> str:
    """lines[i] stripped, with continuation lines appended until the '<' list closes."""
    text = lines[i].strip()
    j = i + 1
    while text.count("<") > text.count(">") and j < len(lines) and j - i <= _MAX_WRAP:
        nxt = lines[j].strip()
        if not nxt or "=" in nxt.split("<", 1)[0] or ": " in nxt:
            break  # the next field, not a continuation
        text += nxt
        j += 1
    return text


def parse_dmesg(text: str) -> DmesgBoot:
    """Parse a kernel message buffer; only the last boot counts. Never raises."""
    lines = _kernel_lines(text)
    starts = _boot_starts(lines)
    first = starts[0] if starts else len(lines)
    head_has_content = any(_looks_kernel(line) for line in lines[:first])
    boots = len(starts) + (1 if head_has_content else 0)
    body = lines[starts[-1]:] if starts else lines

    banner: str | None = None
    os_name: str | None = None
    hbsd = False
    model: str | None = None
    fields: dict[str, frozenset[str]] = {}
    hypervisor: str | None = None
    isa0: frozenset[str] | None = None
    drivers: dict[str, DriverMessage] = {}

    for i, raw in enumerate(body):
        line = raw.strip()
        if not line:
            continue
        # Each regex below is anchored; a cheap str test that every match must pass comes
        # first, so most lines of a long dmesg cost no regex at all.
        if banner is None and "BSD " in line:
            m = _BANNER.match(line)
            if m:
                banner, os_name = line, m.group(1)
                if m.group(2).endswith("-HBSD"):
                    hbsd = True
                continue
        if line[0] not in _FIRST_CHARS:
            continue
        if line.startswith("HardenedBSD: initialize and check features") or (
            "HardenedBSD" in line and line.startswith("Copyright") and _COPYRIGHT.match(line)
        ):
            hbsd = True
            continue
        if line.startswith("CPU"):
            m = _CPU_X86.match(line) if line.startswith("CPU: ") else _CPU_ARM.match(line)
            if m and m.group(1):
                model = m.group(1)
            continue
        if line.startswith(_BITFIELD_PREFIXES):
            m = _BITFIELD.match(line)
            if m:
                joined = _join_wrapped(body, i)
                fields[m.group(1)] = _names(joined.split("<", 1)[1])
                continue
        if line.startswith("Instruction Set Attributes 0 = <"):
            m = _ISA0.match(line)
            if m:
                isa0 = _isa_names(_join_wrapped(body, i).split("<", 1)[1])
                continue
        if line.startswith('Hypervisor: Origin = "'):
            m = _HYPERVISOR.match(line)
            if m:
                hypervisor = m.group(1).strip()
                continue
        m = _DRIVER.match(line) if line.startswith(DRIVERS) else None
        if m:
            driver, msg = m.group(1), m.group(3)
            if msg.startswith("<") and ">" in msg:
                desc = msg[1 : msg.index(">")]
                algos = tuple(a.strip() for a in desc.split(",") if a.strip())
                dm = DriverMessage(driver, True, algos, msg)
            else:
                dm = DriverMessage(driver, False, (), msg)
            drivers.pop(driver, None)
            drivers[driver] = dm

    if starts and not body:
        boots = max(boots, 1)
    if boots == 0 and (banner or model or fields or drivers or hypervisor or isa0):
        boots = 1
    cpu = CpuFeatures(
        model=model,
        features2=fields.get("Features2"),
        stdext=fields.get("Structured Extended Features"),
        hypervisor=hypervisor,
        isa0=isa0,
        stdext2=fields.get("Structured Extended Features2"),
    )
    return DmesgBoot(
        banner=banner,
        os_name=os_name,
        boots=boots,
        cpu=cpu,
        drivers=tuple(drivers.values()),
        hardenedbsd=hbsd,
    )


def _looks_kernel(line: str) -> bool:
    """A line a kernel would print (used to count a partial boot at the top of a wrapped buffer)."""
    s = line.strip()
    return bool(
        _BANNER.match(s) or s.startswith("CPU: ") or _BITFIELD.match(s) or _DRIVER.match(s)
        or re.match(r"^[a-z_]+\d+: ", s) or re.match(r"^[a-z_]+\d+ (?:at|on) ", s)
    )
