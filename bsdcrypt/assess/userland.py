"""The status side of userland AES-NI (pure): probe evidence -> UserlandInfo -> findings.

Which case a CPU without the AES-NI flag is (hidden by a hypervisor, or a real CPU without it: never
force there), which library each service links and whether it honours OPENSSL_ia32cap, and whether an
OPENSSL_ia32cap already set somewhere still fits this host (the guard). docs/userland.md, findings.md.
"""

from __future__ import annotations

import re

from bsdcrypt.parsers import decimal, ia32cap
from bsdcrypt.parsers.openssl_version import parse_version
from bsdcrypt.probe import OPENSSL_PROGRAMS, Evidence, StepName, openssl_step
from bsdcrypt.status import CPUInfo, CryptoLibInfo, Finding, OverrideInfo, ServiceLinkInfo, Status, UserlandInfo
from bsdcrypt.text import visible

X86 = frozenset({"amd64", "i386", "x86_64", "i686", "i586", "i486"})
GLOBAL_FILES = ("/etc/login.conf", "/etc/environment", "/etc/profile")
# `tor_env="OPENSSL_ia32cap=0x..:0x.."` (rc.conf), `Environment=OPENSSL_ia32cap=...` (systemd),
# `export OPENSSL_ia32cap=...` (/etc/default/tor, profile), `:setenv=OPENSSL_ia32cap=...` (login.conf).
# Patterns as text: compiled on first use (re caches them), not at status's start-up.
_RC_ENV = r"^\s*([A-Za-z_][A-Za-z0-9_]*)_env\s*="
_VALUE = r"OPENSSL_ia32cap\s*=\s*[\"']?([^\"'\s:\\]*(?::[^\"'\s:\\]*)*)"
_LDD = r"^\s*(lib(?:crypto|nss3)[^\s]*)\s*=>\s*(\S+)"
_DROPIN = r"^/etc/systemd/system/([^/]+)\.service\.d/[^/]+\.conf$"


def _text(ev: Evidence, name: str) -> str | None:
    st = ev.step(name)
    return None if st is None else st.text


def libraries(ev: Evidence) -> list[CryptoLibInfo] | None:
    """Each openssl program that answered; None when the probe had no such step (older recordings)."""
    steps = [(p, ev.step(openssl_step(p))) for p in OPENSSL_PROGRAMS]
    if all(st is None for _, st in steps):
        return None
    out: list[CryptoLibInfo] = []
    for path, st in steps:
        if st is None or not st.ok:
            continue
        v = parse_version(st.text)
        if v is None:
            out.append(CryptoLibInfo(path=path))
            continue
        lib = ia32cap.library(v)
        cap = v.ia32cap
        out.append(
            CryptoLibInfo(
                path=path,
                library=v.library,
                version=v.version,
                honours_ia32cap=True if lib.grammar else (False if v.library == "LibreSSL" else None),
                grammar=lib.grammar,
                vector=ia32cap.format_value(cap) if cap else None,
                aesni=ia32cap.has_aesni(cap),
                pclmulqdq=ia32cap.has_pclmulqdq(cap),
            )
        )
    return out


def program_for(libcrypto: str) -> str:
    """Which openssl program shares a libcrypto: ports/packages under /usr/local, else the base one
    (FreeBSD /lib, /usr/lib; Linux distributions /lib/<triplet>, /usr/lib/<triplet>)."""
    return "/usr/local/bin/openssl" if libcrypto.startswith("/usr/local/") else "/usr/bin/openssl"


def services(ev: Evidence) -> list[ServiceLinkInfo] | None:
    text = _text(ev, StepName.CRYPTO_LINKS)
    if text is None:
        return None
    out: list[ServiceLinkInfo] = []
    for line in text.splitlines():
        if line.startswith("== "):
            out.append(ServiceLinkInfo(binary=line[3:].strip()))
            continue
        m = re.match(_LDD, line)
        if m and out and out[-1].libcrypto is None and m.group(2).startswith("/"):
            lib = m.group(2)
            out[-1].libcrypto = lib
            out[-1].openssl = None if "nss3" in m.group(1) else program_for(lib)
    return out


def _scope(path: str, text: str) -> tuple[str, str | None]:
    m = re.match(_DROPIN, path)
    if m:
        return "service", m.group(1)
    if path in GLOBAL_FILES:
        return "global", None
    if path == "/etc/default/tor":
        return "service", "tor"
    rc = re.match(_RC_ENV, text)
    if rc:
        return "service", rc.group(1)
    return "other", None


def overrides(ev: Evidence, detected: tuple[int, ...] | None, lib: ia32cap.Library | None) -> list[OverrideInfo] | None:
    text = _text(ev, StepName.IA32CAP_OVERRIDES)
    if text is None:
        return None
    out: list[OverrideInfo] = []
    for raw in text.splitlines():
        parts = raw.split(":", 2)
        line = decimal(parts[1]) if len(parts) == 3 else None
        if line is None:
            continue
        path, content = visible(parts[0], None), parts[2]
        if content.lstrip().startswith("#"):
            continue  # a comment: rc.conf, drop-ins, profile and login.conf alike ignore it
        scope, service = _scope(path, content)
        m = re.search(_VALUE, content)
        if m is None or not m.group(1):
            out.append(OverrideInfo(path, line, None, scope, service, "unreadable",
                                    "OPENSSL_ia32cap is named here but its value cannot be read"))
            continue
        value = m.group(1)
        if not (value.isascii() and value.isprintable()):
            out.append(OverrideInfo(path, line, None, scope, service, "unreadable",
                                    "OPENSSL_ia32cap is set here to a value with control or non-ASCII characters"))
            continue
        hazard, message = ia32cap.classify_override(value, detected, lib)
        out.append(OverrideInfo(path, line, value, scope, service, hazard, message))
    return out


def case(cpu: CPUInfo, arch: str | None, libs: list[CryptoLibInfo] | None) -> str | None:
    if arch is not None and arch not in X86:
        return "not-x86"
    aes = cpu.aesni
    if aes is None and libs:
        seen = [lib.aesni for lib in libs if lib.aesni is not None]
        aes = any(seen) if seen else None
    if aes:
        return "aesni-visible"
    if aes is None or cpu.vm is None:
        return None
    return "hidden-by-hypervisor" if cpu.vm else "cpu-without-aesni"


def userland_info(ev: Evidence, cpu: CPUInfo, arch: str | None) -> UserlandInfo:
    libs = libraries(ev)
    base = _detected(libs)
    info = UserlandInfo(case=case(cpu, arch, libs), libraries=libs, services=services(ev))
    info.overrides = overrides(ev, base[0] if base else None, base[1] if base else None)
    return info


def _detected(libs: list[CryptoLibInfo] | None) -> tuple[tuple[int, ...], ia32cap.Library] | None:
    """The vector a 3.x openssl detects on this host (the base one first), and its library rules."""
    for lib in libs or []:
        if lib.vector:
            words = ia32cap.parse_value(lib.vector)
            if words:
                grammar = lib.grammar
                n = 5 if grammar == "five-word" else 2
                return words, ia32cap.Library(grammar, n, True, "")  # type: ignore[arg-type]
    return None


# ---- findings ---------------------------------------------------------------------------------------

PROVIDER = (
    "ask the provider to expose AES and PCLMULQDQ to the VM (KVM/Proxmox: CPU type host or an -AES model "
    "such as x86-64-v2-AES instead of kvm64; VMware: a higher EVC baseline; Hyper-V: no processor "
    "compatibility mode; Xen: no cpuid mask on aes): it also fixes kernel crypto, which no variable can"
)


def findings(s: Status) -> list[Finding]:
    u = s.userland_aes
    out: list[Finding] = []
    libs = [lib for lib in (u.libraries or []) if lib.library]
    honour = [lib for lib in libs if lib.honours_ia32cap]
    if u.case == "hidden-by-hypervisor" and libs:
        if honour:
            names = ", ".join(f"{lib.path} ({lib.library} {lib.version})" for lib in honour)
            out.append(
                Finding(
                    "userland-aesni-hidden",
                    "info",
                    f"The hypervisor hides AES-NI from this VM's CPU (no aes flag, hypervisor present); the physical "
                    f"CPU may still have it. {names} honour OPENSSL_ia32cap, so userland OpenSSL can be told to use "
                    "it once a trial proves it executes.",
                    "bsdcrypt userland (computes the value from this host's own vector, proves it in a child "
                    "process, measures before/after, applies it per service only); better: " + PROVIDER
                    + "; TLS servers: prefer ChaCha20-Poly1305 meanwhile.",
                )
            )
        else:
            names = ", ".join(f"{lib.path} ({lib.library} {lib.version})" for lib in libs)
            out.append(
                Finding(
                    "userland-aesni-hidden",
                    "info",
                    f"The hypervisor hides AES-NI from this VM's CPU; {names} ignore OPENSSL_ia32cap (LibreSSL has no "
                    "override), so userland AES stays in software.",
                    PROVIDER[0].upper() + PROVIDER[1:] + "; meanwhile prefer ChaCha20-Poly1305 (TLS, SSH).",
                )
            )
    elif u.case == "cpu-without-aesni" and libs:
        out.append(
            Finding(
                "userland-cpu-no-aesni",
                "info",
                "This CPU has no AES-NI and runs on bare metal: userland AES runs in software, and forcing "
                "OPENSSL_ia32cap would crash every program that uses it (SIGILL).",
                "Never set OPENSSL_ia32cap here; prefer ChaCha20-Poly1305 (TLS: PrioritizeChaCha, SSH: "
                "chacha20-poly1305@openssh.com).",
            )
        )
    for o in u.overrides or []:
        out.extend(_override_finding(s, o))
    return out


def _where(o: OverrideInfo) -> str:
    return f"{o.file}:{o.line}" + (f" ({o.service})" if o.service else "")


def _override_finding(s: Status, o: OverrideInfo) -> list[Finding]:
    u = s.userland_aes
    words = ia32cap.parse_value(o.value) if o.value else None
    forces = bool(words and words[0] & ia32cap.AESNI)
    if u.case == "cpu-without-aesni" and forces:
        return [
            Finding(
                "userland-override-sigill",
                "critical",
                f"OPENSSL_ia32cap at {_where(o)} forces AES-NI on a CPU without it: the service dies with SIGILL "
                "(a crash loop under a supervisor).",
                f"Remove it (bsdcrypt userland --check --remove), or delete the line at {_where(o)}, and restart "
                "the service.",
            )
        ]
    if o.scope == "global":
        return [
            Finding(
                "userland-override-global",
                "warning",
                f"OPENSSL_ia32cap is set globally at {_where(o)}: every program using OpenSSL gets it (sshd, "
                "pkg, ...), and all of them die if the host moves to a CPU without AES-NI.",
                "Set it per service only (bsdcrypt userland prints the rc.conf <svc>_env or systemd drop-in) and "
                f"remove it from {o.file}.",
            )
        ]
    if o.hazard in ("plus", "no-0x", "stale", "replaces-w1", "unreadable"):
        return [
            Finding(
                f"userland-override-{o.hazard}",
                "warning",
                f"OPENSSL_ia32cap at {_where(o)}: {o.message}.",
                "Recompute it on this host with `bsdcrypt userland` (trial and before/after), or remove it "
                "(`bsdcrypt userland --check --remove`).",
            )
        ]
    if o.hazard == "ok":
        return [
            Finding(
                "userland-override",
                "info",
                f"OPENSSL_ia32cap at {_where(o)} is this host's own vector with AES-NI/PCLMULQDQ added.",
                "`bsdcrypt userland --check` re-runs the trial (the periodic script can do it daily).",
            )
        ]
    return []
