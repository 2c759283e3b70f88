"""This run's lines in the host's state file (bench/state.py says what a line is): read, and brought up
to date in place under the file's lock, never rewriting another run's line away."""

from __future__ import annotations

import shlex

import bsdcrypt.bench.state as state
from bsdcrypt.bench.model import ST_LEFTOVERS, ST_STATE, STATE_FILE, BenchError
from bsdcrypt.bench.state import StateEntry, parse_state
from bsdcrypt.bench.steps import Steps, first_line


class Ledger:
    """The state-file entries of one run: which lines it wrote, and which an interrupted update may
    have left or not (written again, or dropped, at the next update)."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps
        self.boottime: int | None = None
        self.owner = state.this_owner()
        self.written: dict[str, str] = {}  # our units the state file names -> the line written for each
        self.unsure: set[str] = set()  # our lines an interrupted or failed update may have left or not
        self._reported_bad = False

    def read(self) -> list[StateEntry]:
        """Every entry of the state file (any boot); [] when it is missing or unreadable. Lines that
        are no entry are skipped, and said once (they never block a bench or a cleanup)."""
        res = self.steps.run(ST_LEFTOVERS, f"cat {STATE_FILE}")
        if not res.ok:
            return []
        bad: list[str] = []
        entries = parse_state(res.stdout.decode(errors="replace"), bad)
        if bad and not self._reported_bad:
            self._reported_bad = True
            first = bad[0] if len(bad[0]) <= 60 else bad[0][:57] + "..."
            self.steps.warnings.append(
                f"ignored {len(bad)} line(s) of {STATE_FILE} that are no bench entry (the first: {first!r}); "
                "they are left in the file"
            )
        return entries

    def update(self, drop: list[str], add: list[str]) -> bool:
        """Change the state file in place, in one command under its own lock: remove the lines `drop`
        (exactly as they are in the file), append `add`. Other runs' lines stay as they are now, not
        as this run read them earlier: no run ever rewrites another's entry away."""
        if not drop and not add:
            return True
        for line in drop + add:  # one line each, nothing a shell or grep pattern could read otherwise
            if "\n" in line or "\r" in line or "\0" in line:
                raise BenchError(ST_STATE, f"refusing to write a state line holding a line break: {line!r}")
        keep = f"grep -vxF {' '.join('-e ' + shlex.quote(d) for d in drop)}" if drop else "cat --"
        body = (
            't=$(mktemp "$S.XXXXXX") || exit 1; trap \'rm -f "$t"\' EXIT; chmod 644 "$t" || exit 1; '
            f'if [ -f "$S" ]; then {keep} "$S" > "$t"; [ $? -le 1 ] || exit 1; fi; '  # grep -v: 1 = no line left
            + (f"printf '%s\\n' {' '.join(shlex.quote(a) for a in add)} >> \"$t\" || exit 1; " if add else "")
            + 'if [ -s "$t" ]; then mv -f "$t" "$S" || exit 1; else rm -f "$S" || exit 1; fi'
        )
        cmd = (
            f"umask 022; S={STATE_FILE}; export S; B={shlex.quote(body)}; "
            'if command -v lockf >/dev/null 2>&1; then exec lockf -k -t 30 "$S.lock" /bin/sh -c "$B"; '
            'elif command -v flock >/dev/null 2>&1; then exec flock -w 30 "$S.lock" /bin/sh -c "$B"; '
            'else exec /bin/sh -c "$B"; fi'
        )
        res = self.steps.run(ST_STATE, cmd)
        if not res.ok:
            self.steps.warnings.append(
                f"could not update {STATE_FILE}: {first_line(res)} (a crash now leaves devices the next run "
                "cannot attribute)"
            )
        return res.ok

    def sync(self, ours: dict[str, int | None]) -> None:
        """Bring our entries up to date: one per md in `ours` (unit -> bytes), which this run tracks or
        is about to create; other runs' entries are not touched."""
        if self.boottime is None:
            return  # cannot date our entries; leave others' alone (the label still marks ours)
        want = {
            m: StateEntry(self.boottime, m, self.owner, "swap", size, state.RUN_ID, state.controller_id()).line()
            for m, size in ours.items()
        }
        wanted = set(want.values())
        drop = {line for m, line in self.written.items() if want.get(m) != line}
        drop |= {line for line in self.unsure if line not in wanted}
        add = [line for m, line in want.items() if self.written.get(m) != line or line in self.unsure]
        drop |= {line for line in add if line in self.unsure}  # maybe there already: once, not twice
        if not drop and not add:
            return
        self.unsure |= drop | set(add)  # until the host says it is done (an interrupt may come first)
        if self.update(sorted(drop), add):
            self.written = want
            self.unsure = set()

    def settled(self, alive: set[str]) -> bool:
        """Whether the file names exactly the units `alive`, beyond doubt."""
        return set(self.written) == alive and not self.unsure
