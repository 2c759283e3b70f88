"""What earlier benches left on the host (md units, their .eli), and whether each may be removed."""

from __future__ import annotations

from dataclasses import dataclass

import bsdcrypt.bench.state as state
from bsdcrypt.bench.devices import Lifecycle, same_size
from bsdcrypt.bench.ledger import Ledger
from bsdcrypt.bench.model import LABEL, ST_LEFTOVERS, STATE_FILE
from bsdcrypt.bench.state import StateEntry
from bsdcrypt.parsers.mdconfig import MD_NAME, parse_md_rows


@dataclass(frozen=True)
class Leftover:
    """An md unit an earlier bench left, and whether it may be removed.

    status: "dead" (its owner, on this machine, no longer runs: certainly a crashed run's),
    "alive" (its bench still runs), "elsewhere" (owner on another machine: cannot be checked),
    "unclaimed" (labelled bsdcrypt-bench, but no state entry names an owner), "unverified"
    (no label column to confirm a state entry that names no owner).
    """

    md: str
    status: str
    owner: str | None
    why: str
    line: str | None = None  # its state entry, as in the file

    @property
    def certain(self) -> bool:
        return self.status == "dead"


def by_hand(md: str) -> str:
    return f"`geli detach -f {md}.eli` (if it exists) and `mdconfig -d -u {md[2:]} -o force`"


def owner_text(owner: str) -> str:
    pid, _, where = owner.partition("@")
    return f"pid {pid} on {where}"


def find(ledger: Ledger) -> list[Leftover]:
    """md units an earlier bench left behind, each with whether it may be removed.

    With the label column, only units labelled bsdcrypt-bench count, and a state entry says
    whose one is, whatever kern.boottime says now: FreeBSD rewrites kern.boottime at every clock
    step (kern_tc.c tc_setclock), and a labelled md cannot outlive the boot that made it (the
    run that makes the first one after a reboot drops the old entries of units that are gone).
    Without it (mdconfig before -L), an entry counts when the unit is still a swap md of the
    recorded size, and only when its boot time is this one: one of another boot time (a reboot,
    or a clock step) is uncertain and refused, never removed. Entries that no longer hold (unit
    gone, unit with another or no label, other type or size) are dropped from the file, unless
    their owner still runs here, and their units are never touched. The last entry for a unit
    wins (the file is appended to).
    """
    rows, label_column = parse_md_rows(ledger.steps.text(ST_LEFTOVERS, "mdconfig -l -v"))
    by_name = {r.name: r for r in rows}
    latest: dict[str, StateEntry] = {}
    stale: list[str] = []
    for e in ledger.read():
        earlier = latest.get(e.md)
        if earlier is not None and earlier.raw and earlier.raw != e.raw:
            stale.append(earlier.raw)  # superseded by a later line for the same unit
        latest[e.md] = e
    claimed: dict[str, StateEntry] = {}
    uncertain: dict[str, str] = {}
    for md, e in latest.items():
        row = by_name.get(md)
        if row is None or (label_column and row.label != LABEL):
            # Only a crashed run's entry (or one naming no owner) goes: a running bench records its
            # unit before creating it, and a run on another machine cannot be checked from here;
            # dropping its entry would leave its md unclaimed once created, for a --cleanup to take.
            if e.owner is None or state.owner_status(e.owner, e.controller) == "dead":
                stale.append(e.raw or e.line())
            continue
        if label_column:
            claimed[md] = e
            continue
        ok = row.type in (None, "swap") and e.type in (None, "swap")
        if e.size is not None and row.size is not None:
            ok = ok and same_size(row.size, e.size)
        if not ok:
            stale.append(e.raw or e.line())
        elif ledger.boottime is not None and e.boottime == ledger.boottime:
            claimed[md] = e
        else:
            now = "unknown" if ledger.boottime is None else str(ledger.boottime)
            uncertain[md] = (
                f"{md} is listed in {STATE_FILE} with boot time {e.boottime}, and kern.boottime is {now} "
                "now (a reboot, or a clock step: FreeBSD moves kern.boottime with the clock), and this "
                "mdconfig has no labels to tell; if no bsdcrypt bench is running, remove it by hand: "
                f"{by_hand(md)}, then delete its line from {STATE_FILE}"
            )
    candidates = set(claimed) | set(uncertain)
    if label_column:
        candidates |= {r.name for r in rows if r.label == LABEL}
    leftovers = [
        Leftover(md, "unverified", latest[md].owner, uncertain[md]) if md in uncertain
        else classify(md, claimed.get(md), label_column)
        for md in candidates
    ]
    if stale:
        ledger.update(stale, [])
    return sorted(leftovers, key=lambda lo: int(lo.md[2:]))


def classify(md: str, entry: StateEntry | None, label_column: bool) -> Leftover:
    """Whose a leftover is, from its state entry (None: no entry names it)."""
    if entry is None or entry.owner is None:
        if label_column:
            return Leftover(
                md, "unclaimed", None,
                f"{md} is labelled {LABEL} but no entry in {STATE_FILE} names the bench that made it (an "
                "older bsdcrypt, or a run killed right after creating it); remove it with "
                "`bsdcrypt bench cleanup`",
            )
        return Leftover(
            md, "unverified", None,
            f"{md} is listed in {STATE_FILE} without an owner, and this mdconfig has no labels to confirm "
            f"it is a bench md; if no bsdcrypt bench is running, remove it by hand: {by_hand(md)}",
        )
    who = owner_text(entry.owner)
    status = state.owner_status(entry.owner, entry.controller)
    if status == "dead":
        why = f"{md} was left by bsdcrypt {who}, which is no longer running"
    elif status == "alive":
        why = (
            f"{md} belongs to a bsdcrypt bench that is still running ({who}); wait for it to finish (two "
            "benches at once would measure each other)"
        )
    else:
        other = " (another machine of that name)" if who.split(" on ", 1)[1] == state.controller_name() else ""
        why = (
            f"{md} belongs to a bsdcrypt bench started from {who.split(' on ', 1)[1]}{other} ({who}), which "
            f"cannot be checked from here; run `bsdcrypt bench cleanup` there, or if it is no longer "
            f"running, remove it by hand: {by_hand(md)}"
        )
    return Leftover(md, status, entry.owner, why, entry.raw)


def adopt(life: Lifecycle, leftover: Leftover) -> None:
    """Take a leftover over (with its .eli, if any) so that cleanup removes it; its state entry
    goes once it is removed."""
    md = leftover.md
    if not MD_NAME.match(md) or md in life.devices.md:
        return
    life.devices.md.append(md)
    if leftover.line:
        life.ledger.written[md] = leftover.line  # ours now: the state bookkeeping drops it with the md
    if life.steps.run(ST_LEFTOVERS, f"test -c /dev/{md}.eli").ok:
        life.devices.eli.append(f"{md}.eli")
