"""The read-only probe: one batched POSIX sh script per host.

Each step's output (stdout and stderr merged) and exit status are framed by
marker lines carrying a per-run random token, so a failing step never hides
the others and no file content can forge a frame. No step needs root.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Final

from bsdcrypt.errors import ProbeError
from bsdcrypt.hostapi import Host, sh_quote

PROBE_MAGIC = "# bsdcrypt-probe v1"
# The most a real probe prints (the recordings: 6-51 KB; the bulk is dmesg.boot, bounded by the kernel's
# message buffer, and loader files): a host answering more is not answering the probe (fleet-audit's cap).
MAX_OUTPUT = 1 << 20

SYSCTL_OIDS = (
    "kern.ostype kern.osrelease kern.osreldate kern.ident kern.hostname kern.bootfile "
    "hw.machine hw.machine_arch hw.model hw.ncpu hw.physmem kern.vm_guest hw.hv_vendor hardening.version "
    "kern.module_path"
)
CRYPTO_DRIVERS = ("aesni", "ossl", "armv8crypto", "padlock")

OPENSSL_PROGRAMS = ("/usr/bin/openssl", "/usr/local/bin/openssl")
# Services whose crypto OPENSSL_ia32cap can speed up (tor's cells are AES-CTR; TLS servers; sshd). The
# libcrypto lines of ldd without their load addresses (they change from run to run).
SERVICE_BINARIES = (
    "/usr/local/bin/tor", "/usr/bin/tor", "/usr/sbin/tor", "/usr/local/sbin/nginx", "/usr/sbin/nginx",
    "/usr/local/sbin/haproxy", "/usr/sbin/haproxy", "/usr/local/sbin/openvpn", "/usr/sbin/openvpn", "/usr/sbin/sshd",
)
CRYPTO_LINKS_SCRIPT = (
    f"for b in {' '.join(SERVICE_BINARIES)}; do [ -x \"$b\" ] || continue; echo \"== $b\";"
    " ldd \"$b\" 2>&1 | grep -E 'lib(crypto|nss3)[.-]' | sed 's/ *(0x[0-9a-fA-F]*)$//'; done; exit 0"
)
# Where a per-service or (wrongly) global OPENSSL_ia32cap can live, FreeBSD and Linux alike.
OVERRIDE_FILES = (
    "/etc/rc.conf /etc/rc.conf.local /etc/rc.conf.d/* /etc/rc.conf.d/*/* /usr/local/etc/rc.conf.d/* "
    "/usr/local/etc/rc.conf.d/*/* /etc/login.conf "
    "/etc/environment /etc/profile /etc/default/tor /etc/systemd/system/*.service.d/*.conf"
)
IA32CAP_OVERRIDES_SCRIPT = (
    f"for f in {OVERRIDE_FILES}; do [ -f \"$f\" ] && grep -H -n OPENSSL_ia32cap \"$f\"; done; exit 0"
)


# Kernel crypto consumers (issue 27). zfs: only encrypted datasets (unencrypted ones print `off` and
# keystatus `-`), at most 4000 lines; rc 127 without a zfs command.
ZFS_MAX_LINES = 4000
ZFS_CRYPTO_SCRIPT = (
    "command -v zfs >/dev/null 2>&1 || exit 127; zfs get -H -o name,property,value -t filesystem,volume"
    f" encryption,keystatus 2>&1 | awk -F '\\t' '$3 != \"off\" && $3 != \"-\"' | head -n {ZFS_MAX_LINES}; exit 0"
)
# setkey -D as the probe keeps it: the SA type and mode, the E:/A:/C: algorithm names and the state,
# `No SAD entries.` and pfkey_open's error (no root: Operation not permitted); never an address, an
# SPI or key material (pfkey_dump.c prints the keys in hex after the algorithm name). rc is setkey's.
SETKEY_MAX_LINES = 20000
SETKEY_SCRIPT = (
    "command -v setkey >/dev/null 2>&1 || exit 127; o=$(setkey -D 2>&1); r=$?; printf '%s\\n' \"$o\" | awk '"
    "$0 ~ /^pfkey_open:/ || $0 == \"No SAD entries.\" { print; next }"
    " ($1 == \"esp\" || $1 == \"ah\" || $1 == \"ipcomp\" || $1 == \"esp-udp\") && $2 ~ /^mode=/"
    " { print \"\\t\" $1 \" \" $2 }"
    " $1 ~ /^[EAC]:$/ { print \"\\t\" $1 \" \" $2 }"
    " match($0, /state=[a-z]+/) { print \"\\t\" substr($0, RSTART, RLENGTH) }'"
    f" | head -n {SETKEY_MAX_LINES}; exit $r"
)
# Interface groups: openvpn (if_ovpn's cloner, DCO; pfSense also adds its tun/tap OpenVPN interfaces),
# wg (if_wg), tun and tap (their cloners: an openvpn member also in one of them is no DCO interface).
TUNNEL_GROUPS_SCRIPT = "for g in openvpn wg tun tap; do echo \"== $g\"; ifconfig -g \"$g\" 2>&1; done; exit 0"


class StepName:
    """The names of the probe's command steps. Readers ask Evidence for these, never for bare strings
    (tests/test_probe.py checks that the probe gathers every one); per-driver and per-program steps
    are named by `kldstat_m_step` and `openssl_step`, files by `file_step`."""

    UNAME_S: Final = "uname_s"
    UNAME_A: Final = "uname_a"
    FREEBSD_VERSION_K: Final = "freebsd_version_k"
    FREEBSD_VERSION_U: Final = "freebsd_version_u"
    SYSCTL: Final = "sysctl"
    SYSCTL_DEV: Final = "sysctl_dev"
    KLDSTAT_V: Final = "kldstat_v"
    GELI_LIST: Final = "geli_list"
    KENV_SMBIOS: Final = "kenv_smbios"
    MODULE_FILES: Final = "module_files"  # the crypto .ko files on kern.module_path
    APPLIANCE_CRYPTO: Final = "appliance_crypto"
    OPNSENSE_VERSION: Final = "opnsense_version"
    GHOSTBSD_VERSION: Final = "ghostbsd_version"
    ID_U: Final = "id_u"
    LINUX_CPU_FLAGS: Final = "linux_cpu_flags"
    LINUX_AESNI_INTEL: Final = "linux_aesni_intel"
    CRYPTO_LINKS: Final = "crypto_links"
    IA32CAP_OVERRIDES: Final = "ia32cap_overrides"
    # Kernel crypto consumers (issue 27, docs/consumers in docs/output.md)
    ZFS_CRYPTO: Final = "zfs_crypto"
    SETKEY_SAD: Final = "setkey_sad"
    SYSCTL_KTLS: Final = "sysctl_ktls"
    SYSCTL_IPSEC: Final = "sysctl_ipsec"
    TUNNEL_GROUPS: Final = "tunnel_groups"
    # Only a paste gives these (bsdcrypt.collect.paste): `dmesg | grep ...` and `kldstat | grep ...`, whose lines
    # are real but whose gaps mean nothing; the probe never runs them.
    DMESG_FILTERED: Final = "dmesg_filtered"
    KLDSTAT_FILTERED: Final = "kldstat_filtered"


class File:
    """The files the probe always reads (`file_step(path)` names their steps)."""

    RUN_OS_RELEASE: Final = "/var/run/os-release"
    OS_RELEASE: Final = "/etc/os-release"
    PLATFORM: Final = "/etc/platform"  # pfSense, OPNsense
    VERSION: Final = "/etc/version"  # pfSense, OPNsense
    PFSENSE_RELEASE: Final = "/etc/pfsense-release"
    DMESG_BOOT: Final = "/var/run/dmesg.boot"
    LOADER_CONF: Final = "/boot/loader.conf"
    LOADER_CONF_LOCAL: Final = "/boot/loader.conf.local"
    DEVICE_HINTS: Final = "/boot/device.hints"


FILE_PREFIX: Final = "file:"
EXISTS_PREFIX: Final = "exists:"
DIR_PREFIX: Final = "dir:"


def file_step(path: str) -> str:
    """The step holding the content of the file at absolute `path` (File's, or one the loader files name)."""
    return FILE_PREFIX + path


def exists_step(path: str) -> str:
    """The step telling whether `path` (one of MODULE_FILES) exists."""
    return EXISTS_PREFIX + path


def dir_step(path: str) -> str:
    """The step the probe frames for a directory that loader_conf_dirs names (`path` without a trailing /)."""
    return DIR_PREFIX + path


def kldstat_m_step(driver: str) -> str:
    """`kldstat -q -m nexus/DRIVER` (one of CRYPTO_DRIVERS)."""
    return f"kldstat_m:{driver}"


def openssl_step(program: str) -> str:
    """`PROGRAM version -a` (one of OPENSSL_PROGRAMS)."""
    return f"openssl:{program}"


# (step name, sh command). Order is the order of the output.
STEPS: tuple[tuple[str, str], ...] = (
    (StepName.UNAME_S, "uname -s"),
    (StepName.UNAME_A, "uname -a"),
    (StepName.FREEBSD_VERSION_K, "freebsd-version -k"),
    (StepName.FREEBSD_VERSION_U, "freebsd-version -u"),
    (StepName.SYSCTL, f"sysctl {SYSCTL_OIDS}"),
    (StepName.SYSCTL_DEV, "sysctl " + " ".join(f"dev.{d}" for d in CRYPTO_DRIVERS) + " dev.cryptosoft"),
    (StepName.KLDSTAT_V, "kldstat -v"),
    *((kldstat_m_step(d), f"kldstat -q -m nexus/{d}") for d in CRYPTO_DRIVERS),
    (StepName.GELI_LIST, "geli list"),
    # The hypervisor's SMBIOS strings (VirtualBox guests often show kern.vm_guest "generic"); only
    # these three variables are read, never the whole kernel environment.
    (StepName.KENV_SMBIOS, "for v in smbios.system.maker smbios.system.product smbios.bios.vendor;"
     " do printf '%s=' \"$v\"; kenv -q \"$v\" || echo; done"),
    # Every crypto module file kldload could find: each directory of kern.module_path.
    (StepName.MODULE_FILES, "p=$(sysctl -n kern.module_path) || exit 1; IFS=';'; for d in $p; do"
     " for m in " + " ".join(CRYPTO_DRIVERS) + "; do [ -f \"$d/$m.ko\" ] && echo \"$d/$m.ko\"; done; done; exit 0"),
    # pfSense/OPNsense: the GUI's crypto setting (config.xml <system><crypto_hardware>), only that tag;
    # rc 1: no such tag (setting None), 2: not readable without root, 3: no config.xml
    (StepName.APPLIANCE_CRYPTO, "for f in /conf/config.xml /cf/conf/config.xml; do if [ -e \"$f\" ]; then"
     " grep -E -o -m1 '<crypto_hardware>[^<]*</crypto_hardware>|<crypto_hardware */>' \"$f\"; exit $?; fi;"
     " done; exit 3"),
    (StepName.OPNSENSE_VERSION, "opnsense-version"),
    (StepName.GHOSTBSD_VERSION, "ghostbsd-version"),
    (StepName.ID_U, "id -u"),
    (StepName.LINUX_CPU_FLAGS, "grep -m2 -E '^(model name|flags|Features)[[:space:]]*:' /proc/cpuinfo"),
    (StepName.LINUX_AESNI_INTEL, "test -d /sys/module/aesni_intel || grep -qs '^driver.*aesni' /proc/crypto"),
    # Userland (docs/userland.md): each openssl program's version and the vector its libcrypto detects
    # (the variable unset: what OpenSSL finds by itself), which libcrypto the usual services link, and
    # every OPENSSL_ia32cap already set in a configuration file. Nothing heavy: no speed, no trial.
    *((openssl_step(p), f"unset OPENSSL_ia32cap; test -x {p} && {p} version -a") for p in OPENSSL_PROGRAMS),
    (StepName.CRYPTO_LINKS, CRYPTO_LINKS_SCRIPT),
    (StepName.IA32CAP_OVERRIDES, IA32CAP_OVERRIDES_SCRIPT),
    # Kernel crypto consumers: ZFS native encryption, IPsec (in the kernel? its SAs' algorithms, root
    # only), kernel TLS, OpenVPN DCO and WireGuard interfaces
    (StepName.ZFS_CRYPTO, ZFS_CRYPTO_SCRIPT),
    (StepName.SYSCTL_IPSEC, "sysctl net.inet.ipsec.def_policy"),
    (StepName.SETKEY_SAD, SETKEY_SCRIPT),
    (StepName.SYSCTL_KTLS, "sysctl kern.ipc.tls"),
    (StepName.TUNNEL_GROUPS, TUNNEL_GROUPS_SCRIPT),
)

FILES: tuple[str, ...] = (
    File.RUN_OS_RELEASE,
    File.OS_RELEASE,
    File.PLATFORM,
    File.VERSION,
    File.PFSENSE_RELEASE,
    File.DMESG_BOOT,
    File.LOADER_CONF,
    File.LOADER_CONF_LOCAL,
    File.DEVICE_HINTS,
)
# The files the loader reads by default (/boot/defaults/loader.conf's loader_conf_files, and
# local_loader_conf_files since 14.1); every other `file:` step of the probe is not a loader file,
# except the ones under LOADER_CONF_DIR and those the loader files name (`extra_loader_files`).
LOADER_FILES = (File.LOADER_CONF, File.LOADER_CONF_LOCAL, File.DEVICE_HINTS)
LOADER_CONF_DIR = "/boot/loader.conf.d"
# config.lua reads the loader_conf_dirs entries matching the Lua pattern ".conf$" (one character, then
# "conf"): the two sh globs that match the same names, hidden ones included.
CONF_DIR_GLOBS = ("?*conf", ".*conf")
MAX_NAMED = 16  # paths named by loader_conf_files / loader_conf_dirs / local_loader_conf_files, at most
MODULE_FILES: tuple[str, ...] = tuple(f"/boot/kernel/{d}.ko" for d in CRYPTO_DRIVERS)
PASTE_STEPS = (StepName.DMESG_FILTERED, StepName.KLDSTAT_FILTERED)  # only a paste gives these
_STEP_NAMES = frozenset(
    [name for name, _ in STEPS] + [file_step(p) for p in FILES] + [exists_step(p) for p in MODULE_FILES]
    + list(PASTE_STEPS)
)


def is_step(name: str) -> bool:
    """Is `name` a step the probe may gather? Commands by their STEPS names, module files by MODULE_FILES,
    and any file by `file:` + its absolute path (the probe also reads the files loader_conf_files and
    the loader.conf.d globs name, which only the host knows)."""
    return name in _STEP_NAMES or name.startswith(FILE_PREFIX + "/")



# bsdcrypt_read PATH: a file's bytes, read only if it is a regular file of at most MAX_FILE_BYTES, its size
# taken (wc -c) before a byte is read; head -c stops at one more anyway (a file that grows). Not there:
# cat's own error and status 1, as always. A device, FIFO or socket (/dev/zero never ends, a FIFO nobody
# writes never answers) or a larger file: one line, status 2, nothing read (docs/recordings.md).
MAX_FILE_BYTES = 1 << 20
READ_FUNCTION = (
    'bsdcrypt_read() { if [ -f "$1" ] && [ ! -p "$1" ]; then n=$(wc -c < "$1") || return 2; n=$((n + 0)); '
    f'if [ "$n" -gt {MAX_FILE_BYTES} ]; then echo "larger than 1 MiB ($n bytes): not read"; return 2; fi; '
    f'head -c {MAX_FILE_BYTES + 1} -- "$1"; '
    'elif [ -e "$1" ]; then echo "not a regular file (a device, FIFO or socket): not read"; return 2; '
    'else cat -- "$1"; fi; }\n'
    # bsdcrypt_small PATH: would bsdcrypt_read read it (a regular file of at most MAX_FILE_BYTES)?
    'bsdcrypt_small() { [ -f "$1" ] && [ ! -p "$1" ] && n=$(wc -c < "$1") && '
    f'[ "$((n + 0))" -le {MAX_FILE_BYTES} ]; }}'
)

# s NAME COMMAND: run COMMAND (stdout and stderr merged, no stdin) between the frames of NAME.
FRAME_FUNCTION = (
    "s() { printf '%s begin %s\\n' \"$T\" \"$1\"; ( eval \"$2\" ) </dev/null 2>&1;"
    " printf '\\n%s end %s %d\\n' \"$T\" \"$1\" \"$?\"; }"
)


# The steps' output leaves the host in a few large writes, not one small write (so one SSH packet)
# per frame and per command: dd(1) with a 1 MiB output block collects what it reads and writes when
# the block is full or its input ends (FreeBSD's dd.c accumulates partial input blocks unless bs= is
# given; GNU dd alike). The output is byte for byte what the steps print. dd runs with SIGHUP and
# SIGTERM ignored (inherited across exec; FreeBSD's dd sets handlers for SIGINFO and SIGINT only):
# when a timeout terminates the probe's process group, dd still writes the steps that finished (a
# SIGTERM in the first moments, before dd's subshell has set its trap, takes the buffer too: then
# only the first step is there, read as cut off). The first step goes out on its own, before the
# others run, so even a probe killed outright (SIGKILL, SIGINT) leaves a complete frame: its output
# reads as cut off, never as garbage. Two writes in all.
# Without dd the steps are written directly.
BUFFER_COMMAND = "dd ibs=65536 obs=1048576 2>/dev/null"


def build_script(token: str, *, buffered: bool = True) -> str:
    """The probe as one sh script; `token` frames the output of each step. `buffered=False`: every
    step writes its own output straight to stdout (the same bytes, in many small writes)."""
    head, tail = _script_around_token(buffered, STEPS, FILES, MODULE_FILES)
    return head + token + tail


@functools.cache
def _script_around_token(buffered: bool, *tables: object) -> tuple[str, str]:
    """The script before and after the token: the same for every host, built once a process (per
    step tables: `tables` keys the cache, the tests add steps)."""
    lines = [
        "#!/bin/sh",
        PROBE_MAGIC,
        "T=\0",
        "PATH=/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin; export PATH",
        "LC_ALL=C; export LC_ALL",
        FRAME_FUNCTION,
        READ_FUNCTION,
    ]
    steps = [f"s {sh_quote(name)} {sh_quote(cmd)}" for name, cmd in STEPS]
    steps += [f"s {sh_quote(file_step(path))} {sh_quote('bsdcrypt_read ' + sh_quote(path))}" for path in FILES]
    globs = " ".join(f"{LOADER_CONF_DIR}/{g}" for g in CONF_DIR_GLOBS)
    steps.append(f"for x in {globs}; do [ -f \"$x\" ] && s \"{FILE_PREFIX}$x\" 'bsdcrypt_read \"$x\"'; done")
    steps += _named_files_script(globs)
    steps += [f"s {sh_quote(exists_step(path))} {sh_quote('test -e ' + sh_quote(path))}" for path in MODULE_FILES]
    if buffered:
        lines += ["bsdcrypt_steps() {", *(f"  {line}" for line in steps[1:]), "}"]
        lines.append("if command -v dd >/dev/null 2>&1; then")
        lines.append(f"  {steps[0]} | {BUFFER_COMMAND}")
        lines.append(f"  bsdcrypt_steps | (trap '' HUP TERM; exec {BUFFER_COMMAND})")
        lines.append(f"else {steps[0]}; bsdcrypt_steps; fi")
    else:
        lines += steps
    lines.append("exit 0")
    head, _, tail = ("\n".join(lines) + "\n").partition("T=\0")
    return head + "T=", tail


def _named_files_script(globs: str) -> list[str]:
    """Sh lines that read what the loader files name in loader_conf_files, loader_conf_dirs and
    local_loader_conf_files (a file: its content; a directory: a `dir:` step and its *conf files), two
    levels deep and at most MAX_NAMED paths: the probe stays one bounded round trip. Names come from
    the assignment lines' words that start with "/"; Python decides what the loader really reads
    (bsdcrypt.loader.model) and says "unknown" for anything named that was not collected."""
    dir_globs = " ".join(f'"$z"/{g}' for g in CONF_DIR_GLOBS)
    return [
        # (only the files bsdcrypt_read would read: grep on a FIFO or /dev/zero would never end)
        "refs() { for f; do bsdcrypt_small \"$f\" && grep -hsE "
        "'^[[:space:]]*(loader_conf_files|loader_conf_dirs|local_loader_conf_files)"
        "[[:space:]]*=' \"$f\" </dev/null; done | sed 's/#.*//' | tr -s ' \\t\"=' '\\n\\n\\n\\n' | grep '^/'; }",
        f"L=' {' '.join(LOADER_FILES)} '; N=0; R=",
        "named() { set -f; set -- $1; set +f; for z; do case $L in *\" $z \"*) continue ;; esac; [ \"$N\" -lt "
        f"{MAX_NAMED} ] || return 0; N=$((N + 1)); L=\"$L$z \"; "
        f'if [ -d "$z" ]; then s "{DIR_PREFIX}$z" true; for y in {dir_globs}; do [ -f "$y" ] && '
        f's "{FILE_PREFIX}$y" \'bsdcrypt_read "$y"\' && R="$R $y"; done; '
        f'elif [ -f "$z" ]; then s "{FILE_PREFIX}$z" \'bsdcrypt_read "$z"\' && R="$R $z"; '
        # not there, or not a regular file (a device, a FIFO: nothing the loader can read at boot)
        f'else s "{FILE_PREFIX}$z" \'echo "not a regular file"; exit 1\'; fi; done; }}',
        f"set -f; P=$(set +f; refs {' '.join(LOADER_FILES)} {globs}); set +f; named \"$P\"",
        'set -f; P=$(refs $R); set +f; R=; named "$P"',
    ]


def new_token() -> str:
    import secrets  # here, not at start-up: a replay never needs it (~7 ms)

    return "@@bsdcrypt-" + secrets.token_hex(8)


@dataclass(frozen=True)
class Step:
    rc: int
    out: bytes

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def text(self) -> str:
        return self.out.decode("utf-8", errors="replace")


@dataclass
class Evidence:
    """What the probe gathered: step name -> Step. Files are steps named `file:PATH`.

    Readers name steps by StepName and the *_step helpers: asking for a name the probe never
    gathers is a bug (a typo would silently read "absent"), so it raises KeyError; a step the probe
    gathers but this evidence lacks (an older recording) reads None.
    """

    steps: dict[str, Step] = field(default_factory=dict)
    origin: str = "probe"  # "paste": read from pasted command outputs (bsdcrypt.collect.paste), not the probe

    def _get(self, name: str) -> Step | None:
        st = self.steps.get(name)
        if st is None and not is_step(name):
            raise KeyError(f"bsdcrypt bug: the probe has no step named {name!r}")
        return st

    def step(self, name: str) -> Step | None:
        return self._get(name)

    def text(self, name: str) -> str | None:
        """Output of a step that succeeded, else None."""
        st = self._get(name)
        return st.text if st is not None and st.ok else None

    def file(self, path: str) -> bytes | None:
        st = self._get(file_step(path))
        return st.out if st is not None and st.ok else None

    def exists(self, path: str) -> bool | None:
        st = self._get(exists_step(path))
        return None if st is None else st.ok

    def files_under(self, directory: str) -> list[str]:
        prefix = file_step(directory.rstrip("/") + "/")
        return sorted(k[len(FILE_PREFIX):] for k, v in self.steps.items() if k.startswith(prefix) and v.ok)


def render(evidence: Evidence, token: str) -> bytes:
    """Frame evidence exactly as the probe script would print it (used by replay)."""
    chunks: list[bytes] = []
    t = token.encode()
    for name, st in evidence.steps.items():
        chunks.append(t + b" begin " + name.encode() + b"\n" + st.out)
        chunks.append(b"\n" + t + b" end " + name.encode() + b" " + str(st.rc).encode() + b"\n")
    return b"".join(chunks)


def parse_output(data: bytes, token: str) -> Evidence:
    """Split framed probe output into steps; a step without its end frame is dropped."""
    t = token.encode()
    begin = t + b" begin "
    end_frame = b"\n" + t + b" end "
    steps: dict[str, Step] = {}
    pos = 0
    if begin not in data:
        raise ProbeError("the host's reply is not the output of the bsdcrypt probe (no frames found)")
    while True:
        start = data.find(begin, pos)
        if start < 0:
            break
        eol = data.find(b"\n", start)
        if eol < 0:
            break
        raw = data[start + len(begin):eol]
        name = raw.decode("utf-8", errors="replace")
        # the end frame names the step as decoded (an undecodable byte reads U+FFFD in both frames)
        end_marker = end_frame + (raw if raw.isascii() else name.encode()) + b" "
        end = data.find(end_marker, eol)
        if end < 0:
            break  # truncated output: keep what was complete
        rc_start = end + len(end_marker)
        rc_end = data.find(b"\n", rc_start)
        rc_text = data[rc_start:rc_end if rc_end >= 0 else len(data)]
        try:
            rc = int(rc_text)
        except ValueError:
            break
        steps[name] = Step(rc, data[eol + 1:end])
        pos = rc_end + 1 if rc_end >= 0 else len(data)
    if not steps:
        raise ProbeError("the probe output was cut off before its first step finished")
    return Evidence(steps)


def run_probe(host: Host, timeout: float | None = None) -> tuple[bytes, str]:
    """Run the probe on `host` in one round trip: its framed output and the token that frames it."""
    token = new_token()
    return host.run(build_script(token), timeout=timeout).stdout, token


def gather(host: Host, timeout: float | None = None) -> Evidence:
    """Run the probe on `host` in one round trip and split its output into steps."""
    return parse_output(*run_probe(host, timeout))
