"""The `bench` command's flow without the CLI: preflight, run, save the record; the CLI renders.

Each flow returns what to report; errors are BenchError (one line), interrupts BenchInterrupted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bsdcrypt.bench import facts as host_facts
from bsdcrypt.bench.model import BenchParams, BenchResult, CleanupReport, HostFacts, UserlandResult, userland_record
from bsdcrypt.bench.openssl import userland
from bsdcrypt.bench.records import USERLAND_SUFFIX, default_results_dir, save_json, save_record
from bsdcrypt.bench.run import cleanup_leftovers, measure, now
from bsdcrypt.hostapi import Host


@dataclass
class Saved:
    """Where the record went (None: not saved), and why it could not be saved."""

    path: Path | None = None
    error: str | None = None


def _save_dir(save: str | None) -> Path:
    return Path(save).expanduser() if save else default_results_dir()


@dataclass
class UserlandRun:
    result: UserlandResult
    facts: HostFacts | None
    saved: Saved


def run_userland(
    host: Host, *, save: str | None, no_save: bool, progress: Callable[[str], None] | None = None
) -> UserlandRun:
    """`bench --userland`: openssl speed needs neither root nor fio nor an md device, nor FreeBSD."""
    try:
        facts = host_facts.facts_for(host)
    except host_facts.NotFreeBSD as exc:  # openssl speed runs anywhere
        facts = exc.facts
    x86 = facts is None or facts.arch in (None, "amd64", "i386", "x86_64")
    started = now()
    result = userland(host, x86=x86, progress=progress)
    saved = Saved()
    if not no_save:
        hf = facts or HostFacts(hostname=host.name)
        record = userland_record(result, hf, started, now())
        try:
            saved.path = save_json(record, _save_dir(save), started, hf.hostname, USERLAND_SUFFIX.removesuffix(".json"))
        except OSError as exc:
            saved.error = f"could not save the record: {exc}"
    return UserlandRun(result, facts, saved)


@dataclass
class MeasureRun:
    result: BenchResult
    saved: Saved


def run_measure(
    host: Host, params: BenchParams, *, save: str | None, no_save: bool, progress: Callable[[str], None] | None = None
) -> MeasureRun:
    """The GELI bench: the preflight (NotFreeBSD, a BenchError, on other systems), the measurements
    (engine.measure: cleanup on every exit), then the record saved unless `no_save`."""
    facts = host_facts.facts_for(host)
    result = measure(host, params, facts, progress)
    saved = Saved()
    if not no_save:
        try:
            saved.path = save_record(result, _save_dir(save))
        except OSError as exc:
            saved.error = f"could not save the record: {exc}"
    return MeasureRun(result, saved)


def run_cleanup(host: Host, progress: Callable[[str], None] | None = None) -> CleanupReport:
    """`bench cleanup`: what an interrupted bench left, removed or left alone with why (NotFreeBSD, one
    line, on a system without mdconfig)."""
    return cleanup_leftovers(host, progress)
