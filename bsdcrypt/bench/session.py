"""`BenchSession`: runs the steps on one host, tracks the devices it created, cleans them up."""

from __future__ import annotations

import functools
import shlex
import signal
import time
from collections.abc import Callable

from bsdcrypt.bench.model import (
    LABEL,
    MIB,
    ST_CREATE,
    ST_DESTROY,
    ST_DETACH,
    ST_FIO,
    ST_GELI,
    ST_GELI_LIST,
    ST_LEFTOVERS,
    ST_MDLIST,
    ST_MEMORY,
    ST_ONETIME,
    ST_ROOT,
    ST_STATE,
    ST_SWAP,
    ST_SYSCTL,
    STATE_FILE,
    BenchError,
    BenchInterrupted,
    BenchParams,
    CleanupReport,
    fio_args,
)
from bsdcrypt.bench.signals import signals_deferred
from bsdcrypt.errors import BsdcryptError
from bsdcrypt.facts import GeliProvider
from bsdcrypt.host import Host, RunResult
from bsdcrypt.parsers import fio as fio_parser
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.mdconfig import MD_NAME, MdEntry, parse_mdconfig_list
from bsdcrypt.parsers.swapinfo import parse_swapinfo_avail_kib
from bsdcrypt.parsers.sysctl import parse_boottime, parse_sysctl

RETRY_DELAY_S = 1.0  # between a plain and a forced detach/destroy in cleanup


def _first_line(res: RunResult) -> str:
    for blob in (res.stderr, res.stdout):
        text = blob.decode("utf-8", errors="replace").strip()
        if text:
            return text.splitlines()[-1] if len(text.splitlines()) > 3 else " ".join(text.split())
    return f"exit status {res.rc}"


class _Devices:
    """The md units and .eli providers this run created: the only devices it may name."""

    def __init__(self) -> None:
        self.before: set[str] = set()
        self.md: list[str] = []  # alive, created by this run (or adopted leftovers)
        self.eli: list[str] = []  # alive GELI providers on top of those

    def adopt_md(self, name: str) -> str:
        if not MD_NAME.match(name):
            raise BenchError(ST_CREATE, f"mdconfig printed {name!r}, which is not an md(4) unit name")
        if name in self.before:
            raise BenchError(ST_CREATE, f"mdconfig printed {name}, which existed before this run")
        self.md.append(name)
        return name

    def md_ok(self, name: str) -> str:
        if not MD_NAME.match(name) or name not in self.md:
            raise BenchError("device check", f"refusing to touch {name!r}: not an md unit this run created")
        return name

    def eli_ok(self, name: str) -> str:
        base = name[: -len(".eli")] if name.endswith(".eli") else ""
        if not base or base not in self.md:
            raise BenchError("device check", f"refusing to touch {name!r}: not a GELI provider on our md")
        return name


class BenchSession:
    """One bench on one host: runs steps, tracks devices, cleans up."""

    def __init__(
        self, host: Host, params: BenchParams, progress: Callable[[str], None] | None = None
    ) -> None:
        self.host = host
        self.params = params
        self.devices = _Devices()
        self.step: str | None = None
        self.progress = progress or (lambda _msg: None)
        self.boottime: int | None = None
        self.label_supported = True
        self.warnings: list[str] = []
        self.interrupted: str | None = None  # an interrupt arrived while cleanup ran

    # -- running commands
    def run(self, step: str, command: str, *, timeout: float | None = 120.0) -> RunResult:
        self.step = step
        try:
            return self.host.run(command, timeout=timeout)
        except BsdcryptError as exc:  # HostError: unreachable, timed out
            raise BenchError(step, str(exc)) from exc

    def must(self, step: str, command: str, *, timeout: float | None = 120.0) -> RunResult:
        res = self.run(step, command, timeout=timeout)
        if not res.ok:
            raise BenchError(step, f"`{command}` failed: {_first_line(res)}")
        return res

    # -- preflight
    def preflight(self) -> dict[str, str]:
        res = self.must(ST_ROOT, "id -u")
        if res.stdout.decode(errors="replace").strip() != "0":
            raise BenchError(ST_ROOT, "bench creates md(4) and GELI devices and must run as root")
        res = self.run(ST_FIO, "fio --version")
        if not res.ok:
            raise BenchError(ST_FIO, "fio is not installed (install it with `pkg install fio`)")
        fio_version = res.stdout.decode(errors="replace").strip() or "unknown"
        geli_check = "command -v geli && { kldstat -q -m g_eli || test -e /boot/kernel/geom_eli.ko; }"
        res = self.run(ST_GELI, geli_check)
        if not res.ok:
            raise BenchError(ST_GELI, "GELI is not available (no geli(8), or no g_eli class/geom_eli.ko)")
        oids = (
            "kern.hostname kern.osrelease hw.machine_arch hw.model hw.ncpu hw.physmem hw.pagesize "
            "vm.stats.vm.v_free_count vm.stats.vm.v_inactive_count kern.boottime"
        )
        # sysctl exits 1 when one OID is unknown but prints the others.
        facts = parse_sysctl(self.run(ST_SYSCTL, f"sysctl {oids}").stdout.decode(errors="replace"))
        self.boottime = parse_boottime(facts.get("kern.boottime"))
        swap_res = self.run(ST_SWAP, "swapinfo -k")
        swap_kib = parse_swapinfo_avail_kib(swap_res.stdout.decode(errors="replace")) if swap_res.ok else 0
        self._check_memory(facts, swap_kib)
        facts["fio_version"] = fio_version
        return facts

    def _check_memory(self, facts: dict[str, str], swap_kib: int) -> None:
        try:
            page = int(facts.get("hw.pagesize", "4096"))
            free = int(facts["vm.stats.vm.v_free_count"])
            free += int(facts.get("vm.stats.vm.v_inactive_count", "0"))
        except (KeyError, ValueError):
            self.warnings.append("could not read free memory (vm.stats.vm.v_free_count); size not checked")
            return
        ram = free * page
        need = self.params.size_mib * MIB
        reserve = 256 * MIB
        self.step = ST_MEMORY
        if need + reserve > ram + swap_kib * 1024:
            raise BenchError(
                ST_MEMORY,
                f"an md of {self.params.size_mib} MiB needs that much memory; free RAM is "
                f"{ram // MIB} MiB and free swap {swap_kib // 1024} MiB: use a smaller --size",
            )
        if need + reserve > ram:
            self.warnings.append(
                f"--size {self.params.size_mib} MiB exceeds free RAM ({ram // MIB} MiB): the md will page "
                "to swap and the figures will measure swap I/O, not crypto"
            )

    # -- md bookkeeping
    def list_md(self, step: str = ST_MDLIST) -> list[MdEntry]:
        return parse_mdconfig_list(self.must(step, "mdconfig -l -v").stdout.decode(errors="replace"))

    def read_state(self) -> list[str]:
        """md units from the state file that belong to this boot."""
        res = self.run(ST_LEFTOVERS, f"cat {STATE_FILE}")
        if not res.ok:
            return []
        units: list[str] = []
        for line in res.stdout.decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 2 and MD_NAME.match(parts[1]) and self.boottime is not None:
                if parts[0] == str(self.boottime):
                    units.append(parts[1])
        return units

    def write_state(self) -> None:
        if self.devices.md and self.boottime is not None:
            body = "".join(f"{self.boottime} {m}\\n" for m in self.devices.md)
            cmd = f"umask 022; printf {shlex.quote(body)} > {STATE_FILE}"
        else:
            cmd = f"rm -f {STATE_FILE}"
        res = self.run(ST_STATE, cmd)
        if not res.ok:
            self.warnings.append(f"could not update {STATE_FILE}: {_first_line(res)}")

    def find_leftovers(self) -> list[str]:
        listed = self.list_md(ST_LEFTOVERS)
        names = {e.name for e in listed}
        ours = {e.name for e in listed if e.label == LABEL}
        swap = {e.name for e in listed if e.type in (None, "swap")}
        ours |= {m for m in self.read_state() if m in names and m in swap}
        return sorted(ours, key=lambda n: int(n[2:]))

    # -- device lifecycle
    def create_md(self) -> str:
        size = f"{self.params.size_mib}m"
        listed = self.list_md()
        self.devices.before = {e.name for e in listed}
        base = f"mdconfig -a -t swap -s {size}"
        if self.label_supported:
            res = self.run(ST_CREATE, f"{base} -L {LABEL}")
            err = res.stderr.decode(errors="replace")
            if not res.ok and ("illegal option" in err or "usage:" in err):
                self.label_supported = False  # mdconfig before -L: rely on the state file
                res = self.run(ST_CREATE, base)
        else:
            res = self.run(ST_CREATE, base)
        if not res.ok:
            raise BenchError(ST_CREATE, f"`{base}` failed: {_first_line(res)}")
        name = res.stdout.decode(errors="replace").strip()
        md = self.devices.adopt_md(name)
        self.write_state()
        self.progress(f"created {md} ({size}, swap-backed)")
        return md

    def attach_geli(self, md: str) -> tuple[str, GeliProvider]:
        md = self.devices.md_ok(md)
        p = self.params
        self.must(ST_ONETIME, f"geli onetime -e {shlex.quote(p.ealgo)} -l {p.keylen} -s {p.sectorsize} {md}")
        eli = f"{md}.eli"
        self.devices.eli.append(eli)
        res = self.must(ST_GELI_LIST, f"geli list {self.devices.eli_ok(eli)}")
        info = next(iter(parse_geli_list(res.stdout.decode(errors="replace"))), GeliProvider(eli))
        self.progress(f"attached {eli}: {info.encryption} {info.key_length}, Crypto: {info.crypto}")
        return eli, info

    def detach_geli(self, eli: str, force: bool = False) -> None:
        eli = self.devices.eli_ok(eli)
        self.must(ST_DETACH, f"geli detach {'-f ' if force else ''}{eli}")
        self.devices.eli.remove(eli)

    def destroy_md(self, md: str, force: bool = False) -> None:
        md = self.devices.md_ok(md)
        self.must(ST_DESTROY, f"mdconfig -d -u {md[2:]}{' -o force' if force else ''}")
        self.devices.md.remove(md)
        self.write_state()

    def run_fio(self, device: str, direction: str, numjobs: int) -> fio_parser.FioDirection:
        step = f"fio {direction} on {device}"
        if device.endswith(".eli"):
            self.devices.eli_ok(device)
        else:
            self.devices.md_ok(device)
        argv = fio_args(self.params, f"/dev/{device}", direction, numjobs)
        # exec: an interrupted ssh/sh takes fio with it instead of leaving it holding the device
        res = self.run(step, "exec " + shlex.join(argv), timeout=self.params.runtime_s + 180.0)
        out = res.stdout.decode("utf-8", errors="replace")
        try:
            parsed = fio_parser.parse(out)
        except fio_parser.FioParseError as exc:
            why = _first_line(res) if not res.ok else str(exc)
            raise BenchError(step, f"fio failed: {why}") from exc
        if parsed.errors:
            raise BenchError(step, f"fio reported job errors {parsed.errors}: {_first_line(res)}")
        d = parsed.direction(direction)
        if d is None or d.bw_bytes <= 0:
            raise BenchError(step, "fio moved no data")
        self.progress(f"{direction} on {device}: {d.mib_per_s:.0f} MiB/s")
        return d

    # -- cleanup
    def cleanup(self) -> CleanupReport:
        """Detach our GELI providers and destroy our md units; retry with force; verify."""
        report = CleanupReport()
        with signals_deferred() as got:
            self._adopt_unrecorded()
            for eli in list(self.devices.eli):
                self._remove(report, eli, functools.partial(self._detach_forced, eli), self.devices.eli)
            for md in list(reversed(self.devices.md)):
                self._remove(report, md, functools.partial(self._destroy_forced, md), self.devices.md)
            self._verify(report)
        if got:
            self.interrupted = "SIGTERM" if signal.SIGTERM in got else "Ctrl-C"
        return report

    def _note(self, exc: BaseException) -> None:
        """An interrupt that cleanup swallowed to finish its work; re-raised afterwards."""
        if isinstance(exc, KeyboardInterrupt) and self.interrupted is None:
            self.interrupted = exc.reason if isinstance(exc, BenchInterrupted) else "Ctrl-C"

    def _adopt_unrecorded(self) -> None:
        """Devices a step created before it could report them (interrupted mid-command)."""
        try:
            if self.step == ST_CREATE and self.label_supported:
                # mdconfig may have created the unit and been interrupted before we read its
                # name: ours are the labelled units that did not exist before this run.
                known = self.devices.before | set(self.devices.md)
                for e in self.list_md("cleanup: find unrecorded md"):
                    if e.label == LABEL and e.name not in known:
                        self.devices.md.append(e.name)
            for md in list(self.devices.md):
                eli = f"{md}.eli"
                if eli in self.devices.eli:
                    continue
                if self.run("cleanup: find unrecorded GELI", f"test -c /dev/{eli}").ok:
                    self.devices.eli.append(eli)
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            return

    def _gone(self, dev: str) -> bool:
        try:
            if dev.endswith(".eli"):
                return not self.run("verify cleanup", f"test -c /dev/{dev}").ok
            return dev not in {e.name for e in self.list_md("verify cleanup")}
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            return False

    def _detach_forced(self, eli: str, force: bool) -> None:
        self.detach_geli(eli, force=force)

    def _destroy_forced(self, md: str, force: bool) -> None:
        self.destroy_md(md, force=force)

    def _remove(
        self, report: CleanupReport, dev: str, action: Callable[[bool], None], tracked: list[str]
    ) -> None:
        why = ""
        for force in (False, True):
            try:
                action(force)
                report.removed.append(dev)
                return
            except BenchError as exc:
                why = exc.detail
            except (Exception, KeyboardInterrupt) as exc:  # keep cleaning whatever happens
                self._note(exc)
                why = f"{type(exc).__name__}: {exc}"
            if dev not in tracked:  # removed; what failed came after (e.g. the state file)
                report.removed.append(dev)
                return
            if not force:
                time.sleep(RETRY_DELAY_S)  # a device fio just let go of may need a moment
        if self._gone(dev):  # e.g. an interrupted detach that had in fact completed
            tracked.remove(dev)
            report.removed.append(dev)
            return
        report.failed.append((dev, why))

    def _verify(self, report: CleanupReport) -> None:
        for dev, why in list(report.failed):  # gone after all, e.g. with its md forced away
            if self._gone(dev):
                report.failed.remove((dev, why))
                report.removed.append(dev)
                for tracked in (self.devices.eli, self.devices.md):
                    if dev in tracked:
                        tracked.remove(dev)
        failed = {d for d, _ in report.failed}
        try:
            alive = {e.name for e in self.list_md("verify cleanup")}
        except (Exception, KeyboardInterrupt) as exc:
            self._note(exc)
            for dev in report.removed:
                report.failed.append((dev, f"could not verify removal: {exc}"))
            return
        for dev in list(report.removed):
            base = dev[: -len(".eli")] if dev.endswith(".eli") else dev
            if dev.endswith(".eli"):
                try:
                    still = self.run("verify cleanup", f"test -c /dev/{dev}").ok
                except (Exception, KeyboardInterrupt) as exc:
                    self._note(exc)
                    still = True
            else:
                still = base in alive
            if still and dev not in failed:
                report.removed.remove(dev)
                report.failed.append((dev, "still present after removal"))
