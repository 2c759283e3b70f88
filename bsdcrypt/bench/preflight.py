"""Before a bench touches anything: root, fio, GELI, the host's facts, and room for the md."""

from __future__ import annotations

from bsdcrypt.bench.model import (
    MIB,
    ST_FIO,
    ST_GELI,
    ST_MEMORY,
    ST_ROOT,
    ST_SWAP,
    ST_SYSCTL,
    BenchError,
    BenchParams,
)
from bsdcrypt.bench.steps import Steps
from bsdcrypt.parsers.swapinfo import parse_swapinfo_avail_kib
from bsdcrypt.parsers.sysctl import parse_sysctl

# The GELI class is there, or geom(8) can load geom_eli.ko from the kernel's module path
# (sbin/geom/core/geom.c std_load_available: kern.module_path split on ';').
GELI_CHECK = (
    "command -v geli && { kldstat -q -m g_eli || "
    "{ sysctl -n kern.module_path 2>/dev/null || echo /boot/kernel; } | tr ';' '\\n' | "
    'while read -r d; do test -e "$d/geom_eli.ko" && echo "$d/geom_eli.ko"; done | grep -q .; }'
)
SYSCTL_OIDS = (
    "kern.hostname kern.osrelease hw.machine_arch hw.model hw.ncpu hw.physmem hw.pagesize "
    "vm.stats.vm.v_free_count vm.stats.vm.v_inactive_count kern.boottime"
)
RESERVE = 256 * MIB  # memory left to the host beside the md


def preflight(steps: Steps, params: BenchParams) -> dict[str, str]:
    """The host's sysctl facts (and `fio_version`); BenchError naming what is missing."""
    res = steps.must(ST_ROOT, "id -u")
    if res.stdout.decode(errors="replace").strip() != "0":
        raise BenchError(ST_ROOT, "bench creates md(4) and GELI devices and must run as root")
    res = steps.run(ST_FIO, "fio --version")
    if not res.ok:
        raise BenchError(ST_FIO, "fio is not installed (install it with `pkg install fio`)")
    fio_version = res.stdout.decode(errors="replace").strip() or "unknown"
    if not steps.run(ST_GELI, GELI_CHECK).ok:
        raise BenchError(
            ST_GELI, "GELI is not available (no geli(8), or no g_eli class and no geom_eli.ko in kern.module_path)"
        )
    # sysctl exits 1 when one OID is unknown but prints the others.
    facts = parse_sysctl(steps.run(ST_SYSCTL, f"sysctl {SYSCTL_OIDS}").stdout.decode(errors="replace"))
    swap_res = steps.run(ST_SWAP, "swapinfo -k")
    swap_kib = parse_swapinfo_avail_kib(swap_res.stdout.decode(errors="replace")) if swap_res.ok else 0
    check_memory(steps, params, facts, swap_kib)
    facts["fio_version"] = fio_version
    return facts


def check_memory(steps: Steps, params: BenchParams, facts: dict[str, str], swap_kib: int) -> None:
    """Refuse an md larger than free memory and swap; warn when it would page to swap."""
    try:
        page = int(facts.get("hw.pagesize", "4096"))
        free = int(facts["vm.stats.vm.v_free_count"])
        free += int(facts.get("vm.stats.vm.v_inactive_count", "0"))
    except (KeyError, ValueError):
        steps.warnings.append("could not read free memory (vm.stats.vm.v_free_count); size not checked")
        return
    ram = free * page
    need = params.size_mib * MIB
    steps.step = ST_MEMORY
    if need + RESERVE > ram + swap_kib * 1024:
        raise BenchError(
            ST_MEMORY,
            f"an md of {params.size_mib} MiB needs that much memory; free RAM is "
            f"{ram // MIB} MiB and free swap {swap_kib // 1024} MiB: use a smaller --size",
        )
    if need + RESERVE > ram:
        steps.warnings.append(
            f"--size {params.size_mib} MiB exceeds free RAM ({ram // MIB} MiB): the md will page "
            "to swap and the figures will measure swap I/O, not crypto"
        )
