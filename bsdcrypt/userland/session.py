"""On the host: which openssl the service uses, the vector it detects, the value, and its echo check.

Everything runs through host.run (local, SSH); each openssl child has the variable set or unset
explicitly, never inherited from bsdcrypt's own environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from bsdcrypt.errors import BsdcryptError
from bsdcrypt.hostapi import Host, sh_quote
from bsdcrypt.parsers import ia32cap
from bsdcrypt.parsers.openssl_version import OpensslVersion, parse_cpuinfo, parse_version
from bsdcrypt.probe import OPENSSL_PROGRAMS, SERVICE_BINARIES


class UserlandError(BsdcryptError):
    """Nothing can be computed or proved; str() is one line."""


@dataclass
class Derivation:
    openssl: str  # the program whose libcrypto the service uses
    why_openssl: str  # how bsdcrypt chose it
    version: OpensslVersion
    lib: ia32cap.Library
    vector_from: str  # the program whose CPUINFO gave the detected vector
    detected: tuple[int, ...]  # OpenSSL's own vector on this host (masked with --simulate-hidden)
    before_env: str | None  # the "before" of the measurement: None = unset, or the simulation's mask
    value: str | None  # the forced value; None when AES-NI is already visible
    echo: tuple[int, ...] | None = None  # what `version -c` printed with the value (3.x)
    echo_ok: bool | None = None


def _run_openssl(host: Host, openssl: str, args: str, env: str | None) -> str:
    setting = (
        f"OPENSSL_ia32cap={sh_quote(env)}; export OPENSSL_ia32cap" if env is not None else "unset OPENSSL_ia32cap"
    )
    res = host.run(f"( ulimit -c 0 2>/dev/null; {setting}; exec {sh_quote(openssl)} {args} ) </dev/null 2>&1",
                   timeout=60)
    if res.rc != 0:
        text = res.stdout.decode("utf-8", "replace").strip().splitlines()
        raise UserlandError(f"{openssl} {args} failed (exit {res.rc}): {text[-1][:200] if text else 'no output'}")
    return res.stdout.decode("utf-8", "replace")


def choose_openssl(host: Host, service: str, given: str | None) -> tuple[str, str]:
    """(program, why): the one given, else the one whose libcrypto the service's binary links."""
    if given:
        return given, "given with --openssl"
    base = service.split("@")[0]
    candidates = [b for b in SERVICE_BINARIES if b.rsplit("/", 1)[-1] == base]
    script = (
        f"for b in {' '.join(sh_quote(c) for c in candidates)}; do [ -x \"$b\" ] || continue; echo \"== $b\";"
        " ldd \"$b\" 2>&1 | grep -E 'libcrypto[.-]'; break; done; "
        f"for p in {' '.join(OPENSSL_PROGRAMS)}; do [ -x \"$p\" ] && echo \"prog $p\"; done; exit 0"
    )
    res = host.run(script, timeout=60)
    binary = lib = None
    programs: list[str] = []
    for line in res.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("== "):
            binary = line[3:].strip()
        elif "=>" in line and binary and lib is None:
            target = line.split("=>", 1)[1].split()
            lib = target[0] if target and target[0].startswith("/") else None
        elif line.startswith("prog "):
            programs.append(line[5:].strip())
    if binary and lib:
        from bsdcrypt.assess.userland import program_for

        prog = program_for(lib)
        if prog in programs:
            return prog, f"{binary} links {lib}, the library of {prog}"
    if not programs:
        raise UserlandError("no openssl program on the host (/usr/bin/openssl, /usr/local/bin/openssl): give --openssl")
    why = f"no {base} binary found" if not binary else f"{binary} links no libcrypto bsdcrypt recognises"
    return programs[0], f"{why}; using {programs[0]} (give --openssl to choose)"


def derive(host: Host, openssl: str, why: str, *, simulate_hidden: bool = False) -> Derivation:
    """Read the version and detected vector, compute the forced value, check its echo (3.x)."""
    v = parse_version(_run_openssl(host, openssl, "version -a", None))
    if v is None:
        raise UserlandError(f"{openssl} version -a printed no OpenSSL/LibreSSL version line")
    lib = ia32cap.library(v)
    if lib.grammar is None:
        raise UserlandError(lib.why)
    if v.other_cap:
        raise UserlandError(f"{openssl} runs on a non-x86 CPU (OPENSSL_{v.other_cap}): OPENSSL_ia32cap does not apply")
    before: str | None = None
    source = openssl
    if simulate_hidden:
        if not lib.prints_vector:
            raise UserlandError("--simulate-hidden needs OpenSSL 3.x (it reads the masked vector back)")
        before = ia32cap.mask_value(lib, v)
        detected, _, _ = parse_cpuinfo(_run_openssl(host, openssl, "version -c", before))
    else:
        detected = v.ia32cap
        if detected is None:
            detected, source = _vector_from_other(host, openssl)
    if not detected:
        raise UserlandError(f"{openssl} printed no CPUINFO vector")
    if ia32cap.has_aesni(detected) and not simulate_hidden:
        return Derivation(openssl, why, v, lib, source, detected, None, None)
    try:
        value = ia32cap.forced_value(detected, lib)
    except ia32cap.CannotCompute as exc:
        raise UserlandError(str(exc)) from exc
    d = Derivation(openssl, why, v, lib, source, detected, before, value)
    if lib.prints_vector:
        d.echo, _, _ = parse_cpuinfo(_run_openssl(host, openssl, "version -c", value))
        d.echo_ok = ia32cap.echo_matches(value, d.echo)
    return d


def _vector_from_other(host: Host, openssl: str) -> tuple[tuple[int, ...], str]:
    """1.0.2/1.1.1 print no vector: a 3.x openssl on the same host detects the same W0/W1 (research
    §6.7, 7 CPU models identical), so read it there."""
    for other in OPENSSL_PROGRAMS:
        if other == openssl:
            continue
        try:
            v = parse_version(_run_openssl(host, other, "version -a", None))
        except UserlandError:
            continue
        if v is not None and v.ia32cap:
            return v.ia32cap, other
    raise UserlandError(
        f"{openssl} prints no capability vector (OpenSSL before 3.0) and no OpenSSL 3 program is on the host to "
        "read it: install one (FreeBSD: pkg install openssl; it is not used by the service, only read) and run "
        "again; bsdcrypt never copies a vector from another machine"
    )
