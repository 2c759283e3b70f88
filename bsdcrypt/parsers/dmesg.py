"""dmesg / /var/run/dmesg.boot / /var/log/messages kernel lines -> DmesgBoot of the LAST boot.

Formats read from FreeBSD sources:
  x86 identcpu.c   "CPU: %s (%ld.%02ld-MHz %s-class CPU)", "\\n  Features2=0x%b",
                   "Structured Extended Features=0x%b", "Hypervisor: Origin = \\"%s\\""
                   (%b prints 0x<hex><NAME,...>; unknown bits print as "<bN>" inside the list)
  arm64 identcpu.c "CPU%3d: %s %s r%dp%d" + " affinity:", "%29s = <...>" with
                   "Instruction Set Attributes 0"
  aesni.c          "aesni0: <desc>" (newbus attach), "No AES or SHA support." (12+),
                   "No AESNI support." / "No SSE4.1 support." (older)
  armv8_crypto.c   "armv8crypto0: <AES-CBC,AES-XTS[,AES-GCM]>", "CPU lacks AES instructions" (older
                   releases print it without a newline, so the next message is glued on)
  ossl.c           "ossl0: <OpenSSL crypto>"
  g_eli.c          "GEOM_ELI: Device %s created.", "Encryption: %s %u", " Integrity: %s",
                   "    Crypto: %s" (hardware | software | accelerated software), "Device %s destroyed.",
                   "Detached %s on last close."
  vfs_mountroot.c  "Trying to mount root from %s:%s [%s]...": devices attached before it came up with
                   the kernel (compiled in, or preloaded by the loader); after it, from kldload at run time
  banner           "FreeBSD 12.2-RELEASE r366954 GENERIC amd64" (one line), or "FreeBSD 13.0-RELEASE-p4 #0:
                   <date>" and "    root@host:/usr/obj/.../sys/GENERIC amd64": the version string, then
                   MACHINE (real outputs: fixtures/parsers/dmesg/)
"""

from __future__ import annotations

import re

from bsdcrypt.facts import CpuFeatures, DmesgBoot, DriverMessage, GeliProvider
from bsdcrypt.parsers import clean_text, decimal

DRIVERS = ("aesni", "armv8crypto", "ossl", "padlock")

_BOOT_MARK = "---<<BOOT>>---"
_MSGBUF = re.compile(r"^\[\d+\] ?")
_SYSLOG_TIME = re.compile(r"^[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d ")
_SYSLOG_TAG = re.compile(r"([^\s:\[]+)(?:\[\d+\])?: ?")
_COPYRIGHT = re.compile(r"^Copyright \(c\) .*\bProject\.?\s*$")
_BANNER = re.compile(r"^(\w*BSD) (\d+\.\d+\S*)")
# The lines these are matched against are stripped; no `(.*?)\s*$`: over a long blank run inside a
# hostile line that form backtracks in quadratic to cubic time (tests/parsers/test_long_runs.py).
_CPU_MHZ = re.compile(r"\(\d+(?:\.\d+)?-MHz [^()]*-class CPU\)")  # the x86 line's tail
_CPU_ARM = re.compile(r"^CPU\s*0: ")
_BITFIELD = re.compile(r"^(Features2|Structured Extended Features|Structured Extended Features2)"
                       r"=0x([0-9a-fA-F]+)<(.*)$")
# The bits bsdcrypt reads, by field (x86 specialreg.h: CPUID2_PCLMULQDQ 0x2, CPUID2_MOVBE 0x400000,
# CPUID2_AESNI 0x2000000, CPUID2_AVX 0x10000000, CPUID2_HV 0x80000000; CPUID_STDEXT_SHA 0x20000000;
# CPUID_STDEXT2_VAES 0x200, CPUID_STDEXT2_VPCLMULQDQ 0x400). When a paste cuts the <...> list short,
# the hex value before it still holds them (tests/parsers/test_dmesg.py checks them on real outputs).
FIELD_BITS: dict[str, dict[str, int]] = {
    "Features2": {"PCLMULQDQ": 1, "MOVBE": 22, "AESNI": 25, "AVX": 28, "HV": 31},
    "Structured Extended Features": {"SHA": 29},
    "Structured Extended Features2": {"VAES": 9, "VPCLMULQDQ": 10},
}
_BITFIELD_PREFIXES = ("Features2=", "Structured Extended Features")
_ISA0 = re.compile(r"^Instruction Set Attributes 0 = <(.*)$")
_HYPERVISOR = re.compile(r'^Hypervisor: Origin = "(.*)"\s*$')
_DRIVER = re.compile(r"^(" + "|".join(DRIVERS) + r")(\d+): (.*)$")
_ROOT_MOUNT = "Trying to mount root from "
_GELI = "GEOM_ELI: "
_GELI_DEVICE = re.compile(r"^GEOM_ELI: Device (\S+) (created|destroyed)\.")
_GELI_DETACHED = re.compile(r"^GEOM_ELI: Detached (\S+) on last close\.")
_GELI_FIELD = re.compile(r"^GEOM_ELI:\s+(Encryption|Integrity|Crypto): (.*)$")
# MACHINE values the banner ends with (sys/*/include/param.h)
MACHINES = frozenset({"amd64", "i386", "arm64", "arm", "powerpc", "riscv", "mips", "sparc64", "pc98"})
# Strings that name a hypervisor where the CPUID origin is absent (VirtualBox sets no HV bit on
# older versions; QEMU TCG has no signature): ACPI table OEM ids, virtual disk and NIC models.
VM_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"<VBOX\b|\bVBOX HARDDISK\b|^vboxguest\d+: "), "vbox"),
    (re.compile(r"<VMware[ ,]|^vmci\d+: |^pvscsi\d+: "), "vmware"),
    # a verbose boot's PCI listing (sys/dev/pci/pci.c pci_print_verbose: "found->\tvendor=0x%04x, dev=...")
    # with VMware's PCI vendor id: how an arm64 guest, which has no `Hypervisor:` line, shows VMware
    (re.compile(r"\bvendor=0x15ad\b"), "vmware"),
    (re.compile(r"^XEN: Hypervisor version |^xenpci\d+: |^xn\d+: <Virtual Network Interface>"), "xen"),
    (re.compile(r"^Hyper-V Version: |^vmbus\d+: <Hyper-V Vmbus>"), "hv"),
    (re.compile(r"<Parallels\b"), "parallels"),
    (re.compile(r"<(?:BOCHS|QEMU)\b|\bBXPC(?:APIC|RSDT)\b"), "qemu"),
)
# Every match of a VM_HINTS pattern holds one of these or starts its line with one of VM_LINE_STARTS
# (tests/parsers/test_dmesg.py checks it): the lines vm_hint_of is tried on.
VM_LITERALS = ("VBOX", "VMware", "Parallels", "BOCHS", "QEMU", "BXPC", "0x15ad")
VM_LINE_STARTS = ("vboxguest", "vmci", "pvscsi", "XEN: ", "xenpci", "xn", "Hyper-V", "vmbus")
# First characters of every line the loop in parse_dmesg looks at after the banner:
# HardenedBSD/Hypervisor, Copyright/CPU, Features/Features2, Structured, Instruction, GEOM_ELI,
# Trying to mount root, real/avail memory, and the drivers.
_FIRST_CHARS = frozenset("HCFSIGTra" + "".join(d[0] for d in DRIVERS))
_MAX_WRAP = 6  # continuation lines joined onto a wrapped bit-field line
# A line that may carry a msgbuf or syslog prefix: "[", or a syslog time stamp (_kernel_line changes no
# other line but for trailing blanks, which no branch of parse_dmesg sees: it strips every line it reads).
_PREFIXED = re.compile(r"\n(?:\[|" + _SYSLOG_TIME.pattern.removeprefix("^") + ")")
# parse_dmesg's lines: those holding what a branch looks for anywhere in the line, and those whose
# stripped text starts as a branch needs it (a superset: the loop decides).
_LOOKED_FOR = ("BSD ", _ROOT_MOUNT, *VM_LITERALS)
_LINE_STARTS = re.compile(
    r"\n[^\S\n]*(?:real memory|avail memory|GEOM_ELI: |Features|HardenedBSD|Copyright|CPU|Structured|Instruction|"
    r"Hypervisor|" + "|".join((*DRIVERS, *VM_LINE_STARTS)) + ")"
)


def _kernel_lines(text: str) -> tuple[list[str], str]:
    """Lines of kernel output with msgbuf/syslog prefixes removed; other syslog lines dropped.
    Also the lines joined by newlines (for the searches that find which lines to read)."""
    lines = clean_text(text).splitlines()
    joined = "\n".join(lines)
    # Only a line starting with "[" (msgbuf prefix) or "Mmm " (syslog time stamp) can change; a regex
    # that starts at a newline finds them at C speed (most texts have none, or a few).
    found = _lines_with(joined, (), _PREFIXED)
    changed = {i: new for i in found if (new := _kernel_line(lines[i])) != lines[i]}
    if not changed:
        return lines, joined
    kept = [changed.get(i, line) for i, line in enumerate(lines)]
    lines = [line for line in kept if line is not None]
    return lines, "\n".join(lines)


def _kernel_line(raw: str) -> str | None:
    """One line without its msgbuf or syslog prefix; None for a syslog line of another program."""
    line = _MSGBUF.sub("", raw, count=1) if raw[:1] == "[" else raw
    tagged = _syslog(line) if line[3:4] == " " and "A" <= line[:1] <= "Z" else None
    if tagged is not None:
        tag, line = tagged
        if tag != "kernel":
            return None
    return line.rstrip()


def _line_numbers(text: str, positions: list[int]) -> list[int]:
    """The number of the line (0-based, split at newlines) each position is on; positions ascending."""
    out: list[int] = []
    line = prev = 0
    for pos in positions:
        line += text.count("\n", prev, pos)
        prev = pos
        out.append(line)
    return out


def _lines_with(text: str, literals: tuple[str, ...], starts: re.Pattern[str] | None = None) -> dict[int, int]:
    """{line number: offset of a hit in it}, ascending, for the lines of `text` that hold one of
    `literals` or whose start `starts` matches at a newline (or at the text's start): the few lines
    of a long text worth a look, found at C speed (str.find; a regex led by a literal newline)."""
    found: list[int] = []
    for lit in literals:
        at = text.find(lit)
        while at >= 0:
            found.append(at)
            at = text.find(lit, at + 1)
    if starts is not None:  # `starts` begins with a newline: the first line is tried with one before it
        end = text.find("\n")
        if starts.match("\n" + (text if end < 0 else text[:end])):
            found.append(0)
        found += [m.start() + 1 for m in starts.finditer(text)]
    found.sort()
    return dict(zip(_line_numbers(text, found), found, strict=True)) if found else {}


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


def _boot_starts(lines: list[str], marked: dict[int, int]) -> list[int]:
    """Indexes where a boot starts (`marked`: the lines holding a marker or "Copyright").

    A `---<<BOOT>>---` marker starts a boot; so does a copyright banner, unless it is the first
    banner after a marker (KDB/WARNING lines may sit in between) or continues a banner group.
    """
    starts: list[int] = []
    banner_in_boot = False
    for i in marked:  # only these can start a boot; the other lines were skipped at C speed
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


def _from_bits(field: str, value: str, listed: str) -> frozenset[str]:
    """The names of a %b list cut short (no closing '>'): those shown, with the bits bsdcrypt reads taken
    from the hex value instead (a name missing from a cut list proves nothing)."""
    bits = FIELD_BITS.get(field, {})
    word = int(value, 16)
    shown = {n for n in _names(listed) if n not in bits}
    return frozenset(shown | {name for name, bit in bits.items() if word >> bit & 1})


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


def _banner_fields(body: list[str], i: int) -> tuple[str | None, str | None]:
    """(kernel ident, MACHINE) from the banner at body[i] and its build-path line, if shown."""
    line = body[i].strip()
    words = line.split()
    if "#" in line and line[-1:].isdigit() and i + 1 < len(body):
        # "FreeBSD 13.0-RELEASE-p4 #0: <date>" then "    user@host:/usr/obj/.../sys/GENERIC amd64"
        nxt = body[i + 1].split()
        if len(nxt) >= 2 and nxt[-1] in MACHINES and ":/" in nxt[-2]:
            path = nxt[-2].rstrip("/")
            # a redacted path (bsd-hardware.info: "XXX@XXX:/usr/obj/XXXX") names no config
            return (path.rsplit("/", 1)[-1] if "/sys/" in path else None), nxt[-1]
        return None, None
    if len(words) >= 3 and words[-1] in MACHINES:
        ident: str | None = words[-2] if len(words) >= 4 else None
        if ident is not None and (any(c in ident for c in "(/#:") or re.match(r"^r\d+$", ident)):
            ident = None  # a revision or branch, not a config name
        return ident, words[-1]
    return None, None


def has_vm_literal(line: str) -> bool:
    """Whether one of VM_LITERALS is in the line (plain `in` tests: far cheaper than the hint regexes
    on the long CPU feature lines, which hold none)."""
    for lit in VM_LITERALS:
        if lit in line:
            return True
    return False


def vm_hint_of(line: str) -> str | None:
    for pattern, name in VM_HINTS:
        if pattern.search(line):
            return name
    return None


def parse_dmesg(text: str) -> DmesgBoot:
    """Parse a kernel message buffer; only the last boot counts. Never raises."""
    lines, joined = _kernel_lines(text)
    marked = _lines_with(joined, (_BOOT_MARK, "Copyright"))
    starts = _boot_starts(lines, marked)
    first = starts[0] if starts else len(lines)
    head_has_content = any(_looks_kernel(line) for line in lines[:first])
    boots = len(starts) + (1 if head_has_content else 0)
    body = lines[starts[-1]:] if starts else lines
    # the last boot's text, from the start of its first line
    body_text = joined[joined.rfind("\n", 0, marked[starts[-1]]) + 1:] if starts else joined

    banner: str | None = None
    os_name: str | None = None
    hbsd = False
    model: str | None = None
    fields: dict[str, frozenset[str]] = {}
    hypervisor: str | None = None
    isa0: frozenset[str] | None = None
    drivers: dict[str, DriverMessage] = {}
    driver_at: dict[str, int] = {}
    ident: str | None = None
    arch: str | None = None
    root_at: int | None = None
    banner_at: int | None = None
    features_at: int | None = None
    cpu_block_ended = False
    geli: dict[str, dict[str, str]] = {}
    geli_current: str | None = None
    vm_hint: str | None = None
    vm_hint_text: str | None = None

    # Only the lines that hold what a branch below needs ("BSD ", a hypervisor's name, the root
    # mount) or start as one of them; the rest of a long dmesg is skipped at C speed.
    for i in _lines_with(body_text, _LOOKED_FOR, _LINE_STARTS):
        line = body[i].strip()
        if not line:
            continue
        # Each regex below is anchored; a cheap str test that every match must pass comes first.
        if banner is None and "BSD " in line:
            m = _BANNER.match(line)
            if m:
                banner, os_name, banner_at = line, m.group(1), i
                ident, arch = _banner_fields(body, i)
                if m.group(2).endswith("-HBSD"):
                    hbsd = True
                continue
        if vm_hint is None and (line.startswith(VM_LINE_STARTS) or has_vm_literal(line)):
            vm_hint = vm_hint_of(line)
            if vm_hint is not None:
                vm_hint_text = line
        if root_at is None and _ROOT_MOUNT in line:
            root_at = i  # also glued onto another message: "Release APs...Trying to mount root from"
            continue
        if line[0] not in _FIRST_CHARS:
            continue
        if features_at is not None and not cpu_block_ended and line.startswith(("real memory", "avail memory")):
            cpu_block_ended = True
            continue
        if line.startswith(_GELI):
            geli_current = _geli_line(line, geli, geli_current)
            continue
        if line.startswith("Features=0x") and features_at is None and model is not None:
            features_at = i  # the CPU's (a Hyper-V guest prints the hypervisor's Features= line first)
            continue
        if line.startswith("HardenedBSD: initialize and check features") or (
            "HardenedBSD" in line and line.startswith("Copyright") and _COPYRIGHT.match(line)
        ):
            hbsd = True
            continue
        if line.startswith("CPU"):
            model = _cpu_model(line) or model
            continue
        if line.startswith(_BITFIELD_PREFIXES):
            m = _BITFIELD.match(line)
            if m:
                listed = _join_wrapped(body, i).split("<", 1)[1]
                fields[m.group(1)] = _names(listed) if ">" in listed else _from_bits(m.group(1), m.group(2), listed)
                continue
        if line.startswith("Instruction Set Attributes 0 = <"):
            m = _ISA0.match(line)
            if m:
                listed = _join_wrapped(body, i).split("<", 1)[1]
                # a list cut short (no '>') proves no absence, and ISAR0 prints no hex value to fall back on
                isa0 = _isa_names(listed) if ">" in listed else None
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
            elif msg.startswith("<"):
                # the attach line cut inside its <description> (newbus prints it once the device attached):
                # attached, with the algorithms unknown
                dm = DriverMessage(driver, True, (), msg)
            else:
                dm = DriverMessage(driver, False, (), msg)
            drivers.pop(driver, None)
            drivers[driver] = dm
            driver_at[driver] = i

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
        no_features2=features_at is not None and cpu_block_ended and "Features2" not in fields,
        block_complete=features_at is not None and cpu_block_ended,
    )
    if root_at is not None:
        drivers = {
            name: DriverMessage(dm.driver, dm.attached, dm.algorithms, dm.message, driver_at[name] < root_at)
            for name, dm in drivers.items()
        }
    return DmesgBoot(
        banner=banner,
        os_name=os_name,
        boots=boots,
        cpu=cpu,
        drivers=tuple(drivers.values()),
        hardenedbsd=hbsd,
        arch=arch,
        kernel_ident=ident,
        geli=tuple(_geli_provider(name, f) for name, f in geli.items()),
        vm_hint=vm_hint,
        vm_hint_text=vm_hint_text,
        # complete only from its start: a `dmesg` whose buffer wrapped keeps the root mount, not the banner
        # and the probe lines before it
        root_mounted=root_at is not None and banner_at is not None and banner_at < root_at,
    )


def _cpu_model(line: str) -> str | None:
    """The CPU model of a stripped x86 `CPU: MODEL (N-MHz K8-class CPU)` or arm64 `CPU  0: MODEL
    affinity: ...` line (None: neither, or no model): the tails found by str search, not by a
    backtracking regex."""
    if line.startswith("CPU: "):
        rest = line[5:]
        k = rest.rfind("(")
        if k >= 0 and _CPU_MHZ.fullmatch(rest, k):
            rest = rest[:k].rstrip()
        return rest or None
    m = _CPU_ARM.match(line)
    if m is None:
        return None
    rest = line[m.end():]
    k = rest.find("affinity:")
    while k == 0 or k > 0 and not rest[k - 1].isspace():  # the tail starts with blanks
        k = rest.find("affinity:", k + 1)
    return (rest[:k].rstrip() if k > 0 else rest) or None


def _geli_line(line: str, geli: dict[str, dict[str, str]], current: str | None) -> str | None:
    """Fold one GEOM_ELI line into `geli` (provider -> fields); returns the provider it concerns."""
    m = _GELI_DEVICE.match(line)
    if m:
        name, what = m.group(1), m.group(2)
        geli.pop(name, None)
        if what == "created":
            geli[name] = {}
            return name
        return None
    m = _GELI_DETACHED.match(line)
    if m:
        geli.pop(m.group(1), None)
        return None
    m = _GELI_FIELD.match(line)
    if m and current is not None and current in geli:
        geli[current].setdefault(m.group(1), m.group(2).rstrip("."))
    return current


def _geli_provider(name: str, f: dict[str, str]) -> GeliProvider:
    enc = f.get("Encryption", "").split()
    key = decimal(enc[1]) if len(enc) > 1 else None
    return GeliProvider(
        name=name,
        encryption=enc[0] if enc else None,
        key_length=key,
        crypto=f.get("Crypto"),
        authentication=f.get("Integrity"),
    )


_DEVICE_LINE = re.compile(r"[a-z_]+\d+(?:: | (?:at|on) )")  # "em0: ..." / "em0 at pci0" / "ada0 on ..."


def _looks_kernel(line: str) -> bool:
    """A line a kernel would print (used to count a partial boot at the top of a wrapped buffer)."""
    s = line.strip()
    return bool(s) and bool(
        _BANNER.match(s) or s.startswith("CPU: ") or _BITFIELD.match(s) or _DRIVER.match(s)
        or _DEVICE_LINE.match(s)
    )
