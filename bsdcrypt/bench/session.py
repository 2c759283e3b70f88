"""`BenchSession`: one bench on one host, put together from its pieces: the steps it runs (`steps`), its
lines in the state file (`ledger`), its devices and their lifecycle (`life`); `cleanup()` removes them."""

from __future__ import annotations

from collections.abc import Callable

from bsdcrypt.bench import cleanup, leftovers
from bsdcrypt.bench.devices import Lifecycle
from bsdcrypt.bench.ledger import Ledger
from bsdcrypt.bench.model import BenchParams, CleanupReport
from bsdcrypt.bench.steps import Steps
from bsdcrypt.hostapi import Host


class BenchSession:
    """One bench on one host; measure() and cleanup_leftovers() (bench/run.py) drive it."""

    def __init__(
        self, host: Host, params: BenchParams, progress: Callable[[str], None] | None = None
    ) -> None:
        self.params = params
        self.steps = Steps(host, progress)
        self.ledger = Ledger(self.steps)
        self.life = Lifecycle(self.steps, self.ledger, params)
        self.leftovers_removed: list[str] = []

    def find_leftovers(self) -> list[leftovers.Leftover]:
        return leftovers.find(self.ledger)

    def adopt(self, leftover: leftovers.Leftover) -> None:
        leftovers.adopt(self.life, leftover)

    def cleanup(self) -> CleanupReport:
        return cleanup.cleanup(self.life)
