"""The md units and GELI providers of one bench: which it may name (`Devices`), and their lifecycle
(`Lifecycle`: create md, attach GELI, detach, destroy), each change recorded in the state file."""

from __future__ import annotations

import shlex

from bsdcrypt.bench.ledger import Ledger
from bsdcrypt.bench.model import (
    LABEL,
    MIB,
    ST_CREATE,
    ST_DESTROY,
    ST_DETACH,
    ST_GELI_LIST,
    ST_MDLIST,
    ST_ONETIME,
    BenchError,
    BenchParams,
)
from bsdcrypt.bench.steps import Steps, first_line
from bsdcrypt.facts import GeliProvider
from bsdcrypt.hostapi import RunResult
from bsdcrypt.parsers.geli import parse_geli_list
from bsdcrypt.parsers.mdconfig import MD_NAME, MdEntry, parse_mdconfig_list

CREATE_TRIES = 3  # explicit-unit creation: a unit taken meanwhile is skipped


def same_size(printed: int, recorded: int) -> bool:
    """An md's length as mdconfig prints it against the bytes recorded: humanize_number keeps 2-4
    significant digits, "1.0G" stands for 0.95-1.05 GiB."""
    return abs(printed - recorded) <= 0.06 * recorded


class Devices:
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


class Lifecycle:
    """Creates and removes this run's devices through `steps`, keeping `devices` and the state file
    (`ledger`) in step with what exists."""

    def __init__(self, steps: Steps, ledger: Ledger, params: BenchParams) -> None:
        self.steps = steps
        self.ledger = ledger
        self.params = params
        self.devices = Devices()
        self.label_supported = True
        self.pending: str | None = None  # explicit unit being created
        self.sizes: dict[str, int | None] = {}  # bytes of each md we track, for the state file

    def list_md(self, step: str = ST_MDLIST) -> list[MdEntry]:
        return parse_mdconfig_list(self.steps.text(step, "mdconfig -l -v"))

    def tracked(self) -> dict[str, int | None]:
        """Our md units (the one being created last) -> their size: what the state file must name."""
        ours = [m for m in self.devices.md if m != self.pending] + ([self.pending] if self.pending else [])
        return {m: self.sizes.get(m) for m in ours}

    def record(self) -> None:
        self.ledger.sync(self.tracked())

    def create_md(self) -> str:
        size = f"{self.params.size_mib}m"
        self.devices.before = {e.name for e in self.list_md()}
        md = self._create_unit(f"mdconfig -a -t swap -s {size}")
        self.steps.progress(f"created {md} ({size}, swap-backed)")
        return md

    def _create_unit(self, base: str) -> str:
        """Pick the unit, record it in the state file as ours, then create it (`-u N`, labelled
        when mdconfig has -L). Recorded first, the md is never without an owner: a `--cleanup`
        (from any machine) between the creation and our record would otherwise take a labelled md
        no entry claims for a crashed run's and destroy it under this bench; and an interrupt
        between creating it and reading mdconfig's answer cannot leak an md that nothing could
        recognise later."""
        taken = set(self.devices.before)
        for _ in range(CREATE_TRIES):
            unit = next(n for n in range(1 << 20) if f"md{n}" not in taken)
            name = f"md{unit}"
            self.pending = name
            self.sizes[name] = self.params.size_mib * MIB
            self.record()
            res = self._create(base, unit)
            if res.ok:
                self.pending = None
                return self.devices.adopt_md(name)
            self.pending = None
            self.sizes.pop(name, None)
            err = res.stderr.decode(errors="replace")
            if "Device busy" not in err and "File exists" not in err:
                self.record()
                raise BenchError(ST_CREATE, f"`{base} -u {unit}` failed: {first_line(res)}")
            taken.add(name)  # created by someone else since the list: try the next one
        self.record()
        raise BenchError(ST_CREATE, f"`{base}` failed: {CREATE_TRIES} free units were taken meanwhile")

    def _create(self, base: str, unit: int) -> RunResult:
        if self.label_supported:
            res = self.steps.run(ST_CREATE, f"{base} -L {LABEL} -u {unit}")
            err = res.stderr.decode(errors="replace")
            if res.ok or not ("illegal option" in err or "usage:" in err):
                return res
            self.label_supported = False  # mdconfig before -L: rely on the state file
        return self.steps.run(ST_CREATE, f"{base} -u {unit}")

    def attach_geli(self, md: str) -> tuple[str, GeliProvider]:
        md = self.devices.md_ok(md)
        p = self.params
        self.steps.must(ST_ONETIME, f"geli onetime -e {shlex.quote(p.ealgo)} -l {p.keylen} -s {p.sectorsize} {md}")
        eli = f"{md}.eli"
        self.devices.eli.append(eli)
        res = self.steps.must(ST_GELI_LIST, f"geli list {self.devices.eli_ok(eli)}")
        info = next(iter(parse_geli_list(res.stdout.decode(errors="replace"))), GeliProvider(eli))
        self.steps.progress(f"attached {eli}: {info.encryption} {info.key_length}, Crypto: {info.crypto}")
        return eli, info

    def detach_geli(self, eli: str, force: bool = False) -> None:
        eli = self.devices.eli_ok(eli)
        self.steps.must(ST_DETACH, f"geli detach {'-f ' if force else ''}{eli}")
        self.devices.eli.remove(eli)

    def destroy_md(self, md: str, force: bool = False) -> None:
        md = self.devices.md_ok(md)
        self.steps.must(ST_DESTROY, f"mdconfig -d -u {md[2:]}{' -o force' if force else ''}")
        self.devices.md.remove(md)
        self.sizes.pop(md, None)
        self.record()
