"""`measure` and `cleanup_leftovers`: a BenchSession run under one guard that always cleans up."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bsdcrypt.bench.model import (
    ST_LEFTOVERS,
    ST_ROOT,
    ST_SYSCTL,
    BenchError,
    BenchInterrupted,
    BenchParams,
    BenchResult,
    CleanupReport,
    HostFacts,
    Measurement,
    Sample,
)
from bsdcrypt.bench.session import BenchSession
from bsdcrypt.hostapi import Host
from bsdcrypt.interrupts import reason_of, sigterm_raises
from bsdcrypt.parsers.sysctl import parse_boottime, parse_sysctl


def now() -> str:
    """UTC now as records store it (ISO 8601, seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _guarded(session: BenchSession, body: Callable[[], Any]) -> tuple[Any, CleanupReport]:
    """Run `body`; on any exit clean up, and re-raise naming the step."""
    with sigterm_raises():
        try:
            value = body()
        except BenchError as exc:
            exc.cleanup = session.cleanup()
            if session.interrupted:  # Ctrl-C/SIGTERM while cleaning up: raised now that it is done
                raise BenchInterrupted(session.interrupted, exc.step, exc.cleanup, exc.detail) from exc
            raise
        except KeyboardInterrupt as exc:
            reason = reason_of(exc)
            raise BenchInterrupted(reason, session.step, session.cleanup()) from exc
        except BaseException as exc:
            failed_step = session.step or "bench"
            detail = f"{type(exc).__name__}: {exc}"
            report = session.cleanup()
            if session.interrupted:
                raise BenchInterrupted(session.interrupted, failed_step, report, detail) from exc
            raise BenchError(failed_step, detail, report) from exc
        step = session.step
        report = session.cleanup()
        if session.interrupted:
            raise BenchInterrupted(session.interrupted, step, report)
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
    started = now()

    def body() -> BenchResult:
        hf = facts or HostFacts()
        sysctl = session.preflight()
        _clear_leftovers(session)
        _fill_facts(hf, sysctl)
        numjobs = params.numjobs or hf.ncpu or 1
        result = BenchResult(host=hf, params=params, numjobs=numjobs, fio_version=sysctl.get("fio_version"))
        meas: dict[tuple[str, str], Measurement] = {}
        targets = ("geli", "md") if params.ceiling else ("geli",)
        for i in range(params.repeat):
            for target in targets:
                session.progress(f"run {i + 1}/{params.repeat}: {target}")
                md = session.create_md()
                device = md
                if target == "geli":
                    device, info = session.attach_geli(md)
                    crypto = info.crypto
                    if result.crypto is not None and crypto != result.crypto:
                        session.warnings.append(
                            f"GELI crypto path changed between runs: {result.crypto} -> {crypto}"
                        )
                    result.crypto = crypto
                    result.geli_algorithm = info.encryption
                    result.geli_keylength = info.key_length
                for direction in params.directions:
                    d = session.run_fio(device, direction, numjobs)
                    m = meas.setdefault((target, direction), Measurement(target, direction))
                    m.samples.append(Sample(d.bw_bytes, d.iops, d.runtime_ms))
                if target == "geli":
                    session.detach_geli(device)
                session.destroy_md(md)
        result.measurements = [meas[(t, d)] for t in targets for d in params.directions if (t, d) in meas]
        return result

    result, report = _guarded(session, body)
    assert isinstance(result, BenchResult)
    result.cleanup = report
    result.started = started
    result.finished = now()
    result.warnings = session.warnings
    result.leftovers_removed = session.leftovers_removed
    if params.repeat == 1:
        result.warnings.append("single run: no spread; use --repeat N for a median and spread")
    if not report.ok:
        result.warnings.append(report.summary())
    return result


def _clear_leftovers(session: BenchSession) -> None:
    """Before a run: remove what a crashed run of this machine certainly left (its owner is gone),
    report it, and refuse while anything else is there (a bench still running, or doubt)."""
    leftovers = session.find_leftovers()
    session.step = ST_LEFTOVERS
    certain = [lo for lo in leftovers if lo.certain]
    if certain:
        for lo in certain:
            session.adopt_leftover(lo)
        report = session.cleanup()
        if session.interrupted:
            raise BenchInterrupted(session.interrupted, ST_LEFTOVERS, report)
        session.step = ST_LEFTOVERS
        if not report.ok:
            raise BenchError(ST_LEFTOVERS, f"could not remove what an interrupted bench left: {report.summary()}")
        owners = sorted({lo.owner.replace("@", " on ") for lo in certain if lo.owner})
        msg = (
            f"removed {', '.join(report.removed)} left by an interrupted bsdcrypt bench "
            f"(pid {', '.join(owners)}, no longer running)"
        )
        session.leftovers_removed.extend(report.removed)
        session.warnings.append(msg)
        session.progress(msg)
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


def cleanup_leftovers(host: Host, progress: Callable[[str], None] | None = None) -> CleanupReport:
    """`bench --cleanup`: remove md units (and their .eli) an interrupted bench left behind.

    Removes units whose owner is gone and labelled units no state entry claims; leaves alone
    (in `.refused`, with what to do) units of a bench still running, of a bsdcrypt on another
    machine, and unlabelled state entries that name no owner.
    """
    session = BenchSession(host, BenchParams(), progress)
    refused: list[tuple[str, str]] = []

    def body() -> None:
        res = session.must(ST_ROOT, "id -u")
        if res.stdout.decode(errors="replace").strip() != "0":
            raise BenchError(ST_ROOT, "removing md(4)/GELI devices needs root")
        out = session.run(ST_SYSCTL, "sysctl kern.boottime").stdout.decode(errors="replace")
        facts = parse_sysctl(out)
        session.boottime = parse_boottime(facts.get("kern.boottime"))
        for lo in session.find_leftovers():
            if lo.status in ("dead", "unclaimed"):
                session.adopt_leftover(lo)
            else:
                refused.append((lo.md, lo.why))

    _, report = _guarded(session, body)
    report.refused = refused
    return report
