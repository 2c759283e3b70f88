"""`enable --bench`: GELI-on-md measurements around the change, saved, as data (no printing).

The flow (bsdcrypt.enable.flow) calls `measure` before and after perform, then `finish`; the CLI
renders what there is (render/bench: the table and the page) and, for JSON, puts `to_dict` in
enable's document. Lines about what is being measured go to `tell` (the CLI: stderr).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bsdcrypt.bench.model import (
    NO_BEFORE_COMPILED_IN,
    NO_BEFORE_LOADED,
    BenchError,
    BenchInterrupted,
    BenchParams,
    BenchResult,
    HostFacts,
    Speedup,
    compare,
)
from bsdcrypt.hostapi import Host
from bsdcrypt.interrupts import Interrupted
from bsdcrypt.status import Status


class EnableBenchInterrupted(Interrupted):
    """Ctrl-C/SIGTERM during a measurement: `bench` says what its cleanup did, `state` what enable had
    changed by then."""

    def __init__(self, bench: BenchInterrupted, state: str) -> None:
        super().__init__(bench.signame, str(bench))
        self.bench = bench
        self.state = state


class EnableBench:
    """The measurements of one `enable --bench` run: before, after (or "as it is"), the speedup,
    where the records were saved and what went wrong."""

    def __init__(self, save_dir: Path | None = None, tell: Callable[[str], None] = lambda _s: None) -> None:
        from bsdcrypt.bench.records import default_results_dir

        self.save_dir = default_results_dir() if save_dir is None else save_dir
        self.tell = tell
        self.before: BenchResult | None = None
        self.after: BenchResult | None = None
        self.before_error: BenchError | None = None
        self.speedup: Speedup | None = None
        self.errors: list[str] = []
        self.saved: list[str] = []
        self.interrupted: str | None = None
        self.finished = False  # `finish` ran: the flow got to the end, there is a report to give

    def measure(self, host: Host, status: Status | None, phase: str, *, state: str) -> BenchResult | None:
        """One GELI-on-md measurement; phase "before", "after" or "as it is".

        A failure is a message (enable goes on); Ctrl-C/SIGTERM is EnableBenchInterrupted, raised after
        the bench cleaned up, carrying `state` (what enable had changed by then).
        """
        from bsdcrypt.bench.records import save_record
        from bsdcrypt.bench.run import measure

        what = {"before": "before enabling", "after": "after enabling"}.get(phase, "with the driver as it is")
        self.tell(f"--bench: measuring {what} (GELI on a swap-backed md device, then the bare md ceiling)...")
        try:
            result = measure(host, BenchParams(), HostFacts.from_status(status))
        except BenchInterrupted as exc:
            self.interrupted = f"{exc}; {state}"
            raise EnableBenchInterrupted(exc, state) from exc
        except BenchError as exc:
            if phase == "before":
                self.before_error = exc
            self.errors.append(f"{phase}: {exc}")
            self.tell(f"--bench ({what}): {exc}")
            return None
        result.context = f"enable --bench: {phase}"
        try:
            self.saved.append(str(save_record(result, self.save_dir)))
        except OSError as exc:
            self.errors.append(f"could not save the {phase} record: {exc}")
            self.tell(f"bsdcrypt: could not save the record: {exc}")
        if phase == "before":
            self.before = result
        else:
            self.after = result
        return result

    @staticmethod
    def done(loads_driver: bool, persisted: bool) -> str:
        """What enable has changed once perform() ran (said when the 'after' bench is interrupted)."""
        parts = []
        if loads_driver:
            parts.append("the driver IS loaded now (kldload ran)")
        if persisted:
            parts.append("the loader configuration was changed")
        changed = " and ".join(parts) or "nothing was loaded"
        return f"enable's change is done: {changed}; only the bench was interrupted"

    def no_before_reason(self, status: Status | None, *, loads_driver: bool, changes: bool) -> str:
        """Why there is no "before": what enable actually found and did (for compare(None, after))."""
        if loads_driver:
            if self.before_error is not None:
                return f"the 'before' measurement failed at step '{self.before_error.step}'"
            return "no 'before' measurement was made"
        facts = HostFacts.from_status(status)
        if facts.driver_compiled_in or facts.driver_state == "builtin":
            why = NO_BEFORE_COMPILED_IN
        elif facts.driver_state == "loaded":
            why = NO_BEFORE_LOADED
        else:
            why = f"nothing was loaded (driver state: {facts.driver_state})"
        if changes:
            return f"nothing was loaded now, only persisted for the next boot; {why}"
        return why

    def finish(self, why_no_before: str) -> None:
        """The run is over: the speedup of after over before (or the absolute figure and why)."""
        if self.after is not None:
            self.speedup = compare(self.before, self.after, why_no_before)
        self.finished = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "before": None if self.before is None else self.before.to_record(),
            "after": None if self.after is None else self.after.to_record(),
            "speedup": None if self.speedup is None else self.speedup.to_dict(),
            "saved": list(self.saved),
            "errors": list(self.errors),
            "interrupted": self.interrupted,
        }
