"""Removing a run's devices: every GELI provider detached, every md destroyed, plainly then by force,
each removal verified, the state file brought in line; an interrupt waits until this is done."""

from __future__ import annotations

import functools
import signal
import time
from collections.abc import Callable

from bsdcrypt.bench.devices import Lifecycle, same_size
from bsdcrypt.bench.model import LABEL, BenchError, CleanupReport
from bsdcrypt.interrupts import signals_deferred
from bsdcrypt.parsers.mdconfig import parse_md_rows

RETRY_DELAY_S = 1.0  # between a plain and a forced detach/destroy


def cleanup(life: Lifecycle) -> CleanupReport:
    """Detach our GELI providers and destroy our md units; retry with force; verify. A Ctrl-C or
    SIGTERM meanwhile is noted in `life.steps.interrupted` for the caller to raise."""
    report = CleanupReport()
    devices = life.devices
    with signals_deferred() as got:
        _adopt_unrecorded(life)
        for eli in list(devices.eli):
            _remove(life, report, eli, functools.partial(life.detach_geli, eli), devices.eli)
        for md in list(reversed(devices.md)):
            _remove(life, report, md, functools.partial(life.destroy_md, md), devices.md)
        _verify(life, report)
        _sync_state(life)
    if got:
        life.steps.interrupted = "SIGTERM" if signal.SIGTERM in got else "Ctrl-C"
    return report


def _sync_state(life: Lifecycle) -> None:
    """After cleanup: the state file must not name units that are gone (a removal that was
    interrupted, or verified only afterwards), or a later run could take a new md for ours."""
    alive = set(life.devices.md) | ({life.pending} if life.pending else set())
    if life.ledger.settled(alive):
        return
    try:
        life.record()
    except (Exception, KeyboardInterrupt) as exc:
        life.steps.note(exc)


def _adopt_unrecorded(life: Lifecycle) -> None:
    """Devices a step created before it could report them (interrupted mid-command)."""
    steps, devices = life.steps, life.devices
    try:
        if life.pending is not None:
            # told to create this unit (its state entry already names us as the owner): ours if
            # it is there now, was not before, and is a swap md of our size (with our label, when
            # mdconfig was given -L); anything else at that unit is another's and is left alone
            name, life.pending = life.pending, None
            rows, label_column = parse_md_rows(steps.text("cleanup: find unrecorded md", "mdconfig -l -v"))
            want = life.sizes.get(name)
            if name not in devices.before and any(
                r.name == name
                and r.type in (None, "swap")
                and (r.size is None or want is None or same_size(r.size, want))
                and (not (label_column and life.label_supported) or r.label == LABEL)
                for r in rows
            ):
                devices.md.append(name)
            else:
                life.sizes.pop(name, None)
                life.record()
        for md in list(devices.md):
            eli = f"{md}.eli"
            if eli in devices.eli:
                continue
            if steps.run("cleanup: find unrecorded GELI", f"test -c /dev/{eli}").ok:
                devices.eli.append(eli)
    except (Exception, KeyboardInterrupt) as exc:
        steps.note(exc)


def _gone(life: Lifecycle, dev: str) -> bool:
    try:
        if dev.endswith(".eli"):
            return not life.steps.run("verify cleanup", f"test -c /dev/{dev}").ok
        return dev not in {e.name for e in life.list_md("verify cleanup")}
    except (Exception, KeyboardInterrupt) as exc:
        life.steps.note(exc)
        return False


def _remove(
    life: Lifecycle, report: CleanupReport, dev: str, action: Callable[..., None], tracked: list[str]
) -> None:
    why = ""
    for force in (False, True):
        try:
            action(force=force)
            report.removed.append(dev)
            return
        except BenchError as exc:
            why = exc.detail
        except (Exception, KeyboardInterrupt) as exc:  # keep cleaning whatever happens
            life.steps.note(exc)
            why = f"{type(exc).__name__}: {exc}"
        if dev not in tracked:  # removed; what failed came after (e.g. the state file)
            report.removed.append(dev)
            return
        if not force:
            time.sleep(RETRY_DELAY_S)  # a device fio just let go of may need a moment
    if _gone(life, dev):  # e.g. an interrupted detach that had in fact completed
        tracked.remove(dev)
        report.removed.append(dev)
        return
    report.failed.append((dev, why))


def _verify(life: Lifecycle, report: CleanupReport) -> None:
    if not report.removed and not report.failed:
        return  # nothing was there to remove: nothing to look at (nor a command to run)
    devices = life.devices
    for dev, why in list(report.failed):  # gone after all, e.g. with its md forced away
        if _gone(life, dev):
            report.failed.remove((dev, why))
            report.removed.append(dev)
            for tracked in (devices.eli, devices.md):
                if dev in tracked:
                    tracked.remove(dev)
    failed = {d for d, _ in report.failed}
    try:
        alive = {e.name for e in life.list_md("verify cleanup")}
    except (Exception, KeyboardInterrupt) as exc:
        life.steps.note(exc)
        for dev in report.removed:
            report.failed.append((dev, f"could not verify removal: {exc}"))
        return
    for dev in list(report.removed):
        if dev.endswith(".eli"):
            try:
                still = life.steps.run("verify cleanup", f"test -c /dev/{dev}").ok
            except (Exception, KeyboardInterrupt) as exc:
                life.steps.note(exc)
                still = True
        else:
            still = dev in alive
        if still and dev not in failed:
            report.removed.remove(dev)
            report.failed.append((dev, "still present after removal"))
