"""The measurement: `measure` (preflight, leftovers, md/GELI targets measured with fio) and
`cleanup_leftovers`, each a BenchSession run under one guard that always cleans up."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bsdcrypt.bench.facts import NotFreeBSD
from bsdcrypt.bench.model import (
    ST_LEFTOVERS,
    ST_ROOT,
    ST_SYSCTL,
    ST_SYSTEM,
    BenchError,
    BenchInterrupted,
    BenchParams,
    BenchResult,
    CleanupReport,
    HostFacts,
    Measurement,
    Sample,
    fio_args,
)
from bsdcrypt.bench.preflight import preflight
from bsdcrypt.bench.session import BenchSession
from bsdcrypt.bench.steps import Steps, first_line
from bsdcrypt.hostapi import Host
from bsdcrypt.interrupts import reason_of, sigterm_raises
from bsdcrypt.parsers import fio as fio_parser
from bsdcrypt.parsers.sysctl import parse_boottime, parse_sysctl
from bsdcrypt.platform import FREEBSD_FAMILY

SYSTEM_CHECK = "uname -s; command -v mdconfig"  # two lines on a system with md(4)


def now() -> str:
    """UTC now as records store it (ISO 8601, seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _guarded(session: BenchSession, body: Callable[[], Any]) -> tuple[Any, CleanupReport]:
    """Run `body`; on any exit clean up, and re-raise naming the step."""
    steps = session.steps
    with sigterm_raises():
        try:
            value = body()
        except BenchError as exc:
            exc.cleanup = session.cleanup()
            if steps.interrupted:  # Ctrl-C/SIGTERM while cleaning up: raised now that it is done
                raise BenchInterrupted(steps.interrupted, exc.step, exc.cleanup, exc.detail) from exc
            raise
        except KeyboardInterrupt as exc:
            reason = reason_of(exc)
            raise BenchInterrupted(reason, steps.step, session.cleanup()) from exc
        except BaseException as exc:
            failed_step = steps.step or "bench"
            detail = f"{type(exc).__name__}: {exc}"
            report = session.cleanup()
            if steps.interrupted:
                raise BenchInterrupted(steps.interrupted, failed_step, report, detail) from exc
            raise BenchError(failed_step, detail, report) from exc
        step = steps.step
        report = session.cleanup()
        if steps.interrupted:
            raise BenchInterrupted(steps.interrupted, step, report)
        return value, report


def measure(
    host: Host,
    params: BenchParams,
    facts: HostFacts | None = None,
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Run the GELI-on-md benchmark on `host` and return the numbers.

    Raises BenchError (naming the failing step; cleanup already done and reported in
    `.cleanup`) or BenchInterrupted (Ctrl-C/SIGTERM; likewise cleaned up).
    """
    params.validate()
    session = BenchSession(host, params, progress)
    steps, life = session.steps, session.life
    started = now()

    def body() -> BenchResult:
        hf = facts or HostFacts()
        sysctl = preflight(steps, params)
        session.ledger.boottime = parse_boottime(sysctl.get("kern.boottime"))
        _clear_leftovers(session)
        _fill_facts(hf, sysctl)
        numjobs = params.numjobs or hf.ncpu or 1
        result = BenchResult(host=hf, params=params, numjobs=numjobs, fio_version=sysctl.get("fio_version"))
        meas: dict[tuple[str, str], Measurement] = {}
        targets = ("geli", "md") if params.ceiling else ("geli",)
        for i in range(params.repeat):
            for target in targets:
                steps.progress(f"run {i + 1}/{params.repeat}: {target}")
                md = life.create_md()
                device = md
                if target == "geli":
                    device, info = life.attach_geli(md)
                    crypto = info.crypto
                    if result.crypto is not None and crypto != result.crypto:
                        steps.warnings.append(f"GELI crypto path changed between runs: {result.crypto} -> {crypto}")
                    result.crypto = crypto
                    result.geli_algorithm = info.encryption
                    result.geli_keylength = info.key_length
                for direction in params.directions:
                    d = run_fio(session, device, direction, numjobs)
                    m = meas.setdefault((target, direction), Measurement(target, direction))
                    m.samples.append(Sample(d.bw_bytes, d.iops, d.runtime_ms))
                if target == "geli":
                    life.detach_geli(device)
                life.destroy_md(md)
        result.measurements = [meas[(t, d)] for t in targets for d in params.directions if (t, d) in meas]
        return result

    result, report = _guarded(session, body)
    assert isinstance(result, BenchResult)
    result.cleanup = report
    result.started = started
    result.finished = now()
    result.warnings = steps.warnings
    result.leftovers_removed = session.leftovers_removed
    if params.repeat == 1:
        result.warnings.append("single run: no spread; use --repeat N for a median and spread")
    if not report.ok:
        result.warnings.append(report.summary())
    return result


def run_fio(session: BenchSession, device: str, direction: str, numjobs: int) -> fio_parser.FioDirection:
    """One fio job on one of our devices; its figures, or BenchError naming the job."""
    devices = session.life.devices
    step = f"fio {direction} on {device}"
    if device.endswith(".eli"):
        devices.eli_ok(device)
    else:
        devices.md_ok(device)
    argv = fio_args(session.params, f"/dev/{device}", direction, numjobs)
    # exec: no sh left between us and fio. A Ctrl-C at a local terminal reaches fio too (same
    # process group); a dropped SSH exec without a PTY does not: fio runs to its end, and cleanup's
    # forced detach/destroy takes the devices from under it.
    res = session.steps.run(step, "exec " + shlex.join(argv), timeout=session.params.runtime_s + 180.0)
    out = res.stdout.decode("utf-8", errors="replace")
    try:
        parsed = fio_parser.parse(out)
    except fio_parser.FioParseError as exc:
        why = first_line(res) if not res.ok else str(exc)
        raise BenchError(step, f"fio failed: {why}") from exc
    if parsed.errors:
        raise BenchError(step, f"fio reported job errors {parsed.errors}: {first_line(res)}")
    d = parsed.direction(direction)
    if d is None or d.bw_bytes <= 0:
        raise BenchError(step, "fio moved no data")
    session.steps.progress(f"{direction} on {device}: {d.mib_per_s:.0f} MiB/s")
    return d


def _clear_leftovers(session: BenchSession) -> None:
    """Before a run: remove what a crashed run of this machine certainly left (its owner is gone),
    report it, and refuse while anything else is there (a bench still running, or doubt)."""
    steps = session.steps
    leftovers = session.find_leftovers()
    steps.step = ST_LEFTOVERS
    certain = [lo for lo in leftovers if lo.certain]
    if certain:
        for lo in certain:
            session.adopt(lo)
        report = session.cleanup()
        if steps.interrupted:
            raise BenchInterrupted(steps.interrupted, ST_LEFTOVERS, report)
        steps.step = ST_LEFTOVERS
        if not report.ok:
            raise BenchError(ST_LEFTOVERS, f"could not remove what an interrupted bench left: {report.summary()}")
        owners = sorted({lo.owner.replace("@", " on ") for lo in certain if lo.owner})
        msg = (
            f"removed {', '.join(report.removed)} left by an interrupted bsdcrypt bench "
            f"(pid {', '.join(owners)}, no longer running)"
        )
        session.leftovers_removed.extend(report.removed)
        steps.warnings.append(msg)
        steps.progress(msg)
    doubtful = [lo for lo in leftovers if not lo.certain]
    if doubtful:
        raise BenchError(ST_LEFTOVERS, "; ".join(lo.why for lo in doubtful))


def _fill_facts(hf: HostFacts, sysctl: dict[str, str]) -> None:
    hf.hostname = hf.hostname or sysctl.get("kern.hostname")
    hf.release = hf.release or sysctl.get("kern.osrelease")
    hf.arch = hf.arch or sysctl.get("hw.machine_arch")
    hf.cpu_model = hf.cpu_model or sysctl.get("hw.model")
    for attr, oid in (("ncpu", "hw.ncpu"), ("physmem", "hw.physmem")):
        if getattr(hf, attr) is None:
            try:
                setattr(hf, attr, int(sysctl.get(oid, "")))
            except ValueError:
                pass


def _has_md(host: Host, steps: Steps) -> None:
    """NotFreeBSD when the host has no mdconfig(8): no bench can have left an md device there."""
    res = steps.run(ST_SYSTEM, SYSTEM_CHECK)
    lines = res.stdout.decode(errors="replace").splitlines()
    if res.ok and len(lines) > 1:
        return
    system = lines[0].strip() if lines and lines[0].strip().isprintable() else ""
    runs = f"runs {system}, not FreeBSD, and " if system and system not in FREEBSD_FAMILY else ""
    raise NotFreeBSD(
        f"{host.name} {runs}has no mdconfig(8): bench makes md(4) and GELI devices only on FreeBSD-family "
        "systems, so it left none there; nothing to clean up",
        HostFacts(hostname=host.name),
    )


def cleanup_leftovers(host: Host, progress: Callable[[str], None] | None = None) -> CleanupReport:
    """`bench cleanup`: remove md units (and their .eli) an interrupted bench left behind.

    NotFreeBSD (one line) on a host without mdconfig(8). Removes units whose owner is gone and
    labelled units no state entry claims; leaves alone
    (in `.refused`, with what to do) units of a bench still running, of a bsdcrypt on another
    machine, and unlabelled state entries that name no owner.
    """
    session = BenchSession(host, BenchParams(), progress)
    steps = session.steps
    refused: list[tuple[str, str]] = []

    def body() -> None:
        _has_md(host, steps)
        res = steps.must(ST_ROOT, "id -u")
        if res.stdout.decode(errors="replace").strip() != "0":
            raise BenchError(ST_ROOT, "removing md(4)/GELI devices needs root")
        facts = parse_sysctl(steps.run(ST_SYSCTL, "sysctl kern.boottime").stdout.decode(errors="replace"))
        session.ledger.boottime = parse_boottime(facts.get("kern.boottime"))
        for lo in session.find_leftovers():
            if lo.status in ("dead", "unclaimed"):
                session.adopt(lo)
            else:
                refused.append((lo.md, lo.why))

    _, report = _guarded(session, body)
    report.refused = refused
    return report
