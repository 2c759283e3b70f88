"""A paste of command outputs, as people post them when they ask for help -> Evidence.

Accepted: a bare `dmesg` / /var/run/dmesg.boot, and any concatenation of dmesg, `kldstat [-v]`,
`uname -a`, `geli list`, `sysctl` lines, `kenv` lines and loader.conf files, in any order, with or
without shell prompts (`root@host:~ # kldstat -v`, `$ uname -a`, `% geli list`). Each part becomes
the probe step it stands for (docs/analyze.md lists which report field needs which), so `assess()`
reads a paste exactly as it reads a probe; a step that was not pasted is absent, and absent is unknown.

Without prompts the parts are told apart by their shape:
  kldstat     the header "Id Refs Address Size Name" (sbin/kldstat/kldstat.c) and the lines after it
  geli list   "Geom name: NAME" and its "Key: value" lines (sbin/geom/core/geom.c list_one_geom)
  uname -a    "FreeBSD HOST RELEASE ..." (a host name between the system name and the release)
  sysctl      "kern.x: value" lines with a dotted OID
  kenv        name="value" lines among which smbios.* names
  zfs get     the header "NAME PROPERTY VALUE SOURCE" and the lines after it (openzfs cmd/zfs/zfs_main.c)
  setkey -D   an address line followed by an indented "esp|ah|ipcomp mode=... spi=..." line, and the
              indented lines of each SA (lib/libipsec/pfkey_dump.c); "No SAD entries."; "pfkey_open: ..."
`ifconfig`, `ifconfig -a` and `ifconfig IFACE` are read after their prompt only: their `groups:` lines
put the shown interfaces in the groups the probe lists (openvpn, wg, tun, tap); a group with no member
shown counts as empty only when every interface was listed (`ifconfig` or `ifconfig -a`).
  loader.conf unindented name=value / name="value" lines (loader.conf(5))
  dmesg       everything else, when it holds kernel lines (banner, CPU:, device attach lines)
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

from bsdcrypt.parsers import clean_text
from bsdcrypt.parsers.dmesg import parse_dmesg
from bsdcrypt.parsers.ifgroup import is_ifname, members, parse_ifconfig
from bsdcrypt.parsers.version import parse_release
from bsdcrypt.probe import Evidence, File, Step, StepName, file_step

# A shell prompt ending in # $ % or > and a space, then the command: "root@fw:~ # ", "[me@h ~]$ ",
# "h% ", "$ ", "> ". The prompt may be absent when the line is exactly one of the known commands.
_PROMPT = re.compile(r"^(?:[^\s#$%>]*(?:[ :][~/][^\s#$%>]*)?\]?\s?[#$%>]\s+)(?P<cmd>\S.*)$")
_COMMANDS = re.compile(
    r"^(?:sudo\s+|doas\s+)?(?P<prog>dmesg|kldstat|uname|geli|sysctl|kenv|freebsd-version|cat|grep|egrep|more|less"
    r"|head|tail|sysrc|ls|ifconfig|pciconf|zpool|zfs|setkey|df|mount|swapinfo|top|openssl|pkg|service)\b(?P<args>.*)$"
)
_BARE_COMMAND = re.compile(
    r"^(?:sudo\s+|doas\s+)?(?:dmesg(?: -a)?|cat /var/run/dmesg\.boot|kldstat(?: -v)?|uname -[a-zA-Z]+"
    r"|geli list(?: \S+)?|kenv(?: -q)?(?: \S+)?|sysctl [a-z][\w.% -]*|cat /boot/loader\.conf(?:\.local|\.d/\S+)?)$"
)  # matched against stripped lines: no `\s*$` after sysctl's `[\w.% -]*` (quadratic over a blank run)
_FENCE = re.compile(r"^\s*(?:```|~~~)\S*\s*$")
_QUOTE = re.compile(r"^(?:>[ \t]?)+")  # a mail reply's quote marks: "> ", ">>", "> > "
_BOOT_START = re.compile(r"^(?:---<<BOOT>>---|Copyright \(c\) \S+ The \w*BSD Project\.?)\s*$")
_KLD_HEADER = re.compile(r"^\s*Id\s+Refs\s+Address\s+Size\s+Name\s*$")
_KLD_LINE = re.compile(
    r"^\s*(?:\d+\s+\d+\s+0x[0-9a-fA-F]+\s+\S+\s+\S+.*|Contains modules:|Id\s+Name|\d+\s+\S+|Dependencies:|depends on .*"
    r"|\(\S+\))\s*$"
)
_GELI_START = re.compile(r"^Geom name: \S")
_GELI_LINE = re.compile(r"^\s*(?:\d+\.\s+)?[A-Za-z][A-Za-z0-9 _-]*:(?:\s.*)?$")
_SYSCTL_LINE = re.compile(
    r"^(?:kern|hw|dev|vm|net|security|hardening|machdep|vfs|debug|compat|user|p1003_1b)\.[\w.%-]+: ?"
)
_ASSIGN = re.compile(r'^[A-Za-z_][\w.\-\[\]]*\s*=\s*(?:"[^"]*"|[^\s"#]+)\s*(?:#.*)?$')
_COMMENT = re.compile(r"^#")
_SYSNAMES = ("FreeBSD", "HardenedBSD", "MidnightBSD")
_ZFS_HEADER = re.compile(r"^\s*NAME\s+PROPERTY\s+VALUE\s+SOURCE\s*$")
_ZFS_LINE = re.compile(r"^\S+\s+\S+\s+\S.*$")
_SA_START = re.compile(r"^\s+(?:esp|ah|ipcomp|esp-udp|tcp) mode=\S+ spi=")
_SETKEY_LONE = re.compile(r"^(?:No SAD entries\.|pfkey_open: .*)$")
_IFGROUP = re.compile(r"^-g\s+(openvpn|wg|tun|tap)\s*$")
TUNNEL_GROUPS = ("openvpn", "wg", "tun", "tap")  # the groups the probe lists (probe.TUNNEL_GROUPS_SCRIPT)


@dataclass
class Paste:
    """The parts found in a paste, by kind, before they become probe steps."""

    dmesg: list[str] = field(default_factory=list)
    dmesg_filtered: list[str] = field(default_factory=list)
    kldstat: list[str] = field(default_factory=list)
    kldstat_filtered: list[str] = field(default_factory=list)
    uname: list[str] = field(default_factory=list)
    geli: list[str] = field(default_factory=list)
    sysctl: list[str] = field(default_factory=list)
    kenv: list[str] = field(default_factory=list)
    zfs: list[str] = field(default_factory=list)  # zfs get (issue 27's consumers)
    setkey: list[str] = field(default_factory=list)  # setkey -D
    groups: dict[str, list[str]] = field(default_factory=dict)  # ifconfig -g openvpn|wg|tun|tap -> the names
    ifconfig: list[str] = field(default_factory=list)  # ifconfig [-a | IFACE] blocks
    ifconfig_all: bool = False  # one of them listed every interface
    files: dict[str, list[str]] = field(default_factory=dict)  # loader.conf path -> lines

    def kinds(self) -> list[str]:
        named = [("dmesg", self.dmesg), ("dmesg (filtered)", self.dmesg_filtered), ("kldstat", self.kldstat),
                 ("kldstat (filtered)", self.kldstat_filtered),
                 ("uname -a", self.uname), ("geli list", self.geli), ("sysctl", self.sysctl), ("kenv", self.kenv),
                 ("zfs get", self.zfs), ("setkey -D", self.setkey), ("ifconfig", self.ifconfig)]
        groups = [f"ifconfig -g {g}" for g in sorted(self.groups)]
        return [n for n, lines in named if lines] + groups + sorted(self.files)


def _command_kind(cmd: str) -> tuple[str, str | None] | None:
    """(kind, loader file path) for a prompted command line; None for a command bsdcrypt does not read."""
    m = _COMMANDS.match(cmd.strip())
    if not m:
        return None
    prog, args = m.group("prog"), m.group("args")
    if prog == "zfs" and args.split()[:1] == ["get"]:
        return "zfs", None  # through grep too: the lines it keeps are real (a dataset not shown is unknown)
    if prog == "setkey" and args.split("|", 1)[0].split() == ["-D"]:
        return "setkey", None
    if prog == "ifconfig" and (g := _IFGROUP.match(args.strip())):
        return "group", g.group(1)
    if prog == "ifconfig":
        words = args.split()
        if words in ([], ["-a"]):
            return "ifconfig", "all"
        return ("ifconfig", None) if len(words) == 1 and is_ifname(words[0]) and words[0][0] != "-" else None
    filtered = "|" in args or prog in ("grep", "egrep", "head", "tail")
    if "dmesg" in prog or "dmesg" in args:
        return ("dmesg_filtered" if filtered else "dmesg"), None
    if prog == "kldstat":
        if not set(args.split("|", 1)[0].split()) <= {"-v", "-d", "-h", "-vd", "-dv"}:
            return None  # kldstat -m NAME / -n FILE: one module's answer, not the list
        return ("kldstat_filtered" if filtered else "kldstat"), None
    if filtered:
        return None
    if prog == "uname":
        return "uname", None
    if prog == "geli" and args.split()[:1] == ["list"]:
        return "geli", None
    if prog == "sysctl":
        return "sysctl", None
    if prog == "kenv":
        return "kenv", None
    if prog in ("cat", "more", "less"):
        path = next((a for a in args.split() if "/boot/loader.conf" in a), None)
        if path is not None:
            return "file", path
    return None


def _is_uname(line: str) -> bool:
    words = line.split()
    return (
        len(words) >= 3 and words[0] in _SYSNAMES and parse_release(words[1]) is None
        and parse_release(words[2]) is not None
    )


def _split_unprompted(lines: list[str], paste: Paste) -> None:
    """Assign lines of a part without a prompt to kinds by their shape."""
    i = 0
    assigns: list[str] = []
    pending: list[str] = []

    def flush_assigns() -> None:
        if not assigns:
            return
        if any(a.startswith("smbios.") for a in assigns):
            paste.kenv.extend(assigns)
        elif any(_ASSIGN.match(a) for a in assigns):
            paste.files.setdefault(File.LOADER_CONF, []).extend(assigns)
        assigns.clear()

    while i < len(lines):
        line = lines[i]
        if _KLD_HEADER.match(line):
            flush_assigns()
            j = i + 1
            while j < len(lines) and lines[j].strip() and _KLD_LINE.match(lines[j]):
                j += 1
            paste.kldstat.extend(lines[i:j])
            i = j
            continue
        if _ZFS_HEADER.match(line):
            flush_assigns()
            j = i + 1
            while j < len(lines) and lines[j].strip() and _ZFS_LINE.match(lines[j]):
                j += 1
            paste.zfs.extend(lines[i:j])
            i = j
            continue
        if i + 1 < len(lines) and len(line.split()) == 2 and not line[:1].isspace() and _SA_START.match(lines[i + 1]):
            flush_assigns()
            j = i + 1
            while j < len(lines) and (lines[j][:1] in " \t" and lines[j].strip()
                                      or j + 1 < len(lines) and len(lines[j].split()) == 2
                                      and _SA_START.match(lines[j + 1])):
                j += 1
            paste.setkey.extend(lines[i:j])
            i = j
            continue
        if _SETKEY_LONE.match(line.strip()):
            flush_assigns()
            paste.setkey.append(line.strip())
            i += 1
            continue
        if _GELI_START.match(line):
            flush_assigns()
            j = i + 1
            while j < len(lines):
                if not lines[j].strip():
                    nxt = next((x for x in lines[j + 1:] if x.strip()), "")
                    if not _GELI_START.match(nxt):
                        break
                elif not _GELI_LINE.match(lines[j]):
                    break
                j += 1
            paste.geli.extend(lines[i:j] + [""])
            i = j
            continue
        if _COMMENT.match(line) and not assigns:
            pending.append(line)  # a comment heading a loader.conf belongs to it (line numbers)
            i += 1
            continue
        if _ASSIGN.match(line):
            assigns.extend(pending)
        else:
            paste.dmesg.extend(pending)
        pending.clear()
        if _is_uname(line.strip()):
            flush_assigns()
            paste.uname.append(line.strip())
        elif _SYSCTL_LINE.match(line):
            flush_assigns()
            paste.sysctl.append(line)
        elif _ASSIGN.match(line) or (assigns and (_COMMENT.match(line) or not line.strip())):
            assigns.append(line)
        else:
            flush_assigns()
            paste.dmesg.append(line)
        i += 1
    paste.dmesg.extend(pending)
    flush_assigns()


def _unwrap(lines: list[str]) -> list[str]:
    """The lines without what forums and mail put around a paste: quote marks on (nearly) every line of a
    reply, and the indentation of a Markdown code block (the whitespace every line starts with)."""
    text = [ln for ln in lines if ln.strip()]
    if text and _QUOTE.match(text[0]) and sum(1 for ln in text if _QUOTE.match(ln)) >= 0.9 * len(text):
        lines = [_QUOTE.sub("", ln, count=1) for ln in lines]
    return textwrap.dedent("\n".join(lines)).split("\n")


def _starts_other_part(line: str, kind: str) -> bool:
    """A line no output of `kind` holds, that starts another output: kldstat's header, a `Geom name:`
    block, a boot's first line, a uname -a line -- pasted after a prompted command without its own prompt."""
    if kind == "uname":
        return True  # uname -a prints one line
    if _KLD_HEADER.match(line):
        return not kind.startswith("kldstat")
    if _GELI_START.match(line):
        return kind != "geli"
    if _BOOT_START.match(line.strip()):
        return not kind.startswith("dmesg")
    return kind != "dmesg" and _is_uname(line.strip())


def split(text: str) -> Paste:
    """Sort the paste's lines into parts. Never raises."""
    paste = Paste()
    lines = _unwrap(
        [ln.rstrip() for ln in clean_text(text.replace("\r\n", "\n")).split("\n") if not _FENCE.match(ln)]
    )
    current: tuple[str, str | None] | None = None  # the kind of the prompted command being read
    unprompted: list[str] = []
    for line in lines:
        if current is not None and line.strip() and _starts_other_part(line, current[0]):
            current = None  # the rest is read by its shape
        m = _PROMPT.match(line)
        cmd = m.group("cmd") if m else (line.strip() if _BARE_COMMAND.match(line.strip()) else None)
        if m is not None and line[:1] in "#$%>" and _command_kind(m.group("cmd")) is None:
            cmd = None  # a bare "# ..." is a comment unless it runs a command bsdcrypt reads
        if cmd is not None and (m is None or _COMMANDS.match(cmd.strip())):
            _split_unprompted(unprompted, paste)
            unprompted = []
            current = _command_kind(cmd) or ("other", None)
            if current[0] == "group" and current[1] is not None:
                paste.groups.setdefault(current[1], [])  # listed: no name under it means no member
            paste.ifconfig_all |= current == ("ifconfig", "all")
            continue
        if current is None:
            unprompted.append(line)
            continue
        kind, path = current
        if kind == "dmesg":
            paste.dmesg.append(line)
        elif kind == "dmesg_filtered":
            paste.dmesg_filtered.append(line)
        elif kind == "file" and path is not None:
            paste.files.setdefault(path, []).append(line)
        elif kind == "group" and path is not None:
            names = paste.groups.setdefault(path, [])
            if line.strip():
                names.append(line.strip())
        elif kind in ("kldstat", "kldstat_filtered", "uname", "geli", "sysctl", "kenv", "zfs", "setkey", "ifconfig"):
            getattr(paste, kind).append(line)
    _split_unprompted(unprompted, paste)
    return paste


def _text(lines: list[str]) -> bytes:
    # a part's own code-block indentation (a flush-left prompt above indented output) is taken off too
    return (textwrap.dedent("\n".join(lines)).strip("\n") + "\n").encode("utf-8", "surrogateescape")


def _kernel_output(lines: list[str]) -> bool:
    d = parse_dmesg("\n".join(lines))
    # a bare excerpt of device lines counts when one of them names the hypervisor (a VMware disk)
    return bool(d.banner or d.cpu.model or d.drivers or d.cpu.features2 or d.cpu.isa0 or d.geli or d.vm_hint)


def evidence_from_paste(text: str) -> Evidence | None:
    """The probe steps the paste shows; None when it shows none of dmesg, kldstat, uname -a or geli list."""
    p = split(text)
    steps: dict[str, Step] = {}
    if p.dmesg and _kernel_output(p.dmesg):
        steps[file_step(File.DMESG_BOOT)] = Step(0, _text(p.dmesg))
    if p.dmesg_filtered and _kernel_output(p.dmesg_filtered):
        steps[StepName.DMESG_FILTERED] = Step(0, _text(p.dmesg_filtered))
    if p.kldstat:
        steps[StepName.KLDSTAT_V] = Step(0, _text(p.kldstat))
    elif p.kldstat_filtered:
        steps[StepName.KLDSTAT_FILTERED] = Step(0, _text(p.kldstat_filtered))
    unames = [u for u in p.uname if _is_uname(u.strip())]
    if unames:
        steps[StepName.UNAME_A] = Step(0, _text(unames[-1:]))
        steps[StepName.UNAME_S] = Step(0, _text([unames[-1].split()[0]]))
    if p.geli and any(_GELI_START.match(g.lstrip()) for g in p.geli):
        steps[StepName.GELI_LIST] = Step(0, _text(p.geli))
    if not steps:
        return None  # loader.conf, sysctl or kenv lines alone do not make a host
    if p.sysctl:
        steps[StepName.SYSCTL] = Step(0, _text(p.sysctl))
    if p.kenv:
        steps[StepName.KENV_SMBIOS] = Step(0, _text(p.kenv))
    _consumer_steps(p, steps)
    for path, lines in p.files.items():
        steps[file_step(path)] = Step(0, _text(lines))
    return Evidence(steps, origin="paste")


def _consumer_steps(p: Paste, steps: dict[str, Step]) -> None:
    """The kernel consumers' outputs (issue 27) as the probe steps they stand for. The exit status
    the probe would record is told by the text: `pfkey_open:` is setkey's failure (exit 1), an
    `unknown oid` is sysctl's."""
    if p.zfs:
        steps[StepName.ZFS_CRYPTO] = Step(0, _text(p.zfs))
    if p.setkey:
        text = _text(p.setkey)
        steps[StepName.SETKEY_SAD] = Step(1 if text.startswith(b"pfkey_open:") else 0, text)
    ktls = [s for s in p.sysctl if s.lstrip().startswith(("kern.ipc.tls", "sysctl: unknown oid 'kern.ipc.tls"))]
    if ktls:
        steps[StepName.SYSCTL_KTLS] = Step(0, _text(ktls))
    ipsec = [s for s in p.sysctl if s.lstrip().startswith(("net.inet.ipsec.", "sysctl: unknown oid 'net.inet.ipsec"))]
    if ipsec:
        steps[StepName.SYSCTL_IPSEC] = Step(0, _text(ipsec))
    groups = {g: list(names) for g, names in p.groups.items()}
    if p.ifconfig:
        for g, found in _ifconfig_groups(parse_ifconfig("\n".join(p.ifconfig)), p.ifconfig_all).items():
            listed = groups.setdefault(g, [])
            seen = set(listed)  # (found holds each interface once: it comes from parse_ifconfig's keys)
            listed.extend(i for i in found if i not in seen)
    if groups:
        listing = [line for g, names in sorted(groups.items()) for line in [f"== {g}", *names]]
        steps[StepName.TUNNEL_GROUPS] = Step(0, _text(listing))


def _ifconfig_groups(ifaces: dict[str, list[str]], every: bool) -> dict[str, list[str]]:
    """The tunnel-group sections pasted `ifconfig` blocks stand for. A section means "these and no
    others" (the probe lists whole groups), so only a listing of every interface (`ifconfig`, `-a`)
    gives all four, empty ones too. `ifconfig IFACE` gives only what its interfaces prove present: a
    WireGuard interface, and an openvpn member in neither tun nor tap (an if_ovpn DCO interface);
    pfSense/OPNsense's OpenVPN over tun/tap proves nothing about the other interfaces."""
    if every and ifaces:
        return {g: members(ifaces, g) for g in TUNNEL_GROUPS}
    shown: dict[str, list[str]] = {}
    if wg := members(ifaces, "wg"):
        shown["wg"] = wg
    if dco := [i for i in members(ifaces, "openvpn") if not {"tun", "tap"} & set(ifaces[i])]:
        shown["openvpn"] = dco
    return shown
