"""`bsdcrypt bench`: GELI-on-md benchmark (bsdcrypt.bench), results saved and rendered."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from bsdcrypt.bench import (
    BenchError,
    BenchInterrupted,
    BenchParams,
    BenchResult,
    HostFacts,
    Speedup,
)
from bsdcrypt.bench.model import NO_BEFORE_COMPILED_IN, NO_BEFORE_LOADED, compare, userland_record
from bsdcrypt.cli.completion import complete_bench_format
from bsdcrypt.hosts.base import Host
from bsdcrypt.render.bench import (
    cleanup_document,
    compare_document,
    ratios,
    render_compare,
    render_table,
    render_userland,
)
from bsdcrypt.render.serialize import dump as _dump

FORMATS = ("table", "json", "yaml", "prometheus", "html")
COMPARE_FORMATS = ("table", "json", "yaml", "html")
EXIT_INTERRUPTED = 130


def default_results_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "bsdcrypt" / "bench"


def save_json(record: dict[str, Any], directory: Path, started: str, hostname: str | None, suffix: str = "") -> Path:
    """Write a record as DIR/<UTC time>-<host><suffix>.json (never over an existing file)."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9T]", "", started.split("+")[0]) or "run"
    host = re.sub(r"[^A-Za-z0-9._-]", "_", hostname or "host")
    path = directory / f"{stamp}-{host}{suffix}.json"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{stamp}-{host}{suffix}-{n}.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def save_record(result: BenchResult, directory: Path) -> Path:
    """Write the run's JSON record as DIR/<UTC time>-<host>.json; returns the path."""
    return save_json(result.to_record(), directory, result.started, result.host.hostname)


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


def _status_for(host: Host) -> Any:
    """The status assessment (one read-only probe); None if the probe fails."""
    from bsdcrypt.assess import assess
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.probe import gather

    try:
        return assess(gather(host), host.name, host.spec)
    except BsdcryptError:  # the bench still runs with its own sysctl facts
        return None


class NotFreeBSD(BenchError):
    """The probe showed a system without GELI and md(4); `facts` are what it showed."""

    def __init__(self, why: str, facts: HostFacts) -> None:
        super().__init__("preflight: system", why)
        self.why = why
        self.facts = facts


def _facts_for(host: Host) -> HostFacts | None:
    """Host facts from the status assessment; None if the probe fails. NotFreeBSD when the probe
    shows a system other than FreeBSD's family (the GELI bench cannot run there; --userland can)."""
    status = _status_for(host)
    if status is None:
        return None
    facts = HostFacts.from_status(status)
    why = not_freebsd(status)
    if why:
        raise NotFreeBSD(why, facts)
    return facts


def not_freebsd(status: Any) -> str | None:
    """Why a host cannot run the GELI bench, when its probe shows a system other than FreeBSD's family
    (GELI and md(4) are FreeBSD's); None when it is one, or when the probe did not say."""
    from bsdcrypt.platform import APPLIANCES, FREEBSD_FAMILY

    name = getattr(getattr(status, "os", None), "name", None)
    variant = getattr(getattr(status, "os", None), "variant", None)
    if name is None or name in FREEBSD_FAMILY or variant in (*APPLIANCES, "hardenedbsd"):
        return None
    return (
        f"{status.host} runs {name}, not FreeBSD: the bench measures GELI on an md(4) device, which only "
        "FreeBSD-family systems have (bench --userland measures OpenSSL anywhere)"
    )


# --------------------------------------------------------------------------- bench --compare


def _compare(records: list[str], fmt: str, output: str | None) -> None:
    from bsdcrypt.bench.records import expand, label, load, same_file
    from bsdcrypt.cli.options import fail, write_report
    from bsdcrypt.errors import BsdcryptError

    if fmt not in COMPARE_FORMATS:
        fail(f"--compare has no {fmt} report; choose one of: {', '.join(COMPARE_FORMATS)}")
    if not records:
        fail("--compare needs bench records: RECORD.json files or a folder of them (default: "
             f"{default_results_dir()})")
    try:
        paths = expand(records)
        if output is not None and output != "-":
            from bsdcrypt.fsutil import check_output_path

            check_output_path(output)
            if any(same_file(output, p) for p in paths):
                fail(f"the output {output} is one of the records to compare; nothing written")
        runs = [(str(p), load(p)) for p in paths]
    except BsdcryptError as exc:  # a bad record, an unwritable -o: one line naming it
        fail(str(exc))
    if fmt == "table":
        text = render_compare(runs)
    elif fmt == "html":
        from bsdcrypt.render.html import BenchRun, bench_page

        text = bench_page(
            [BenchRun(f"{n}: {label(res)}", res, key=str(n)) for n, (_, res) in enumerate(runs, start=1)],
            title="bsdcrypt bench comparison", command="bench --compare",
            source=", ".join(p for p, _ in runs), ratios=ratios(runs),
        )
    else:
        text = _dump(compare_document(runs), fmt)
    write_report(text, output)


# --------------------------------------------------------------------------- enable --bench


class EnableBench:
    """`enable --bench`: the measurements around the change, saved and reported.

    Text: the before/after table is printed by `report`. JSON: enable's document is handed
    over (`document`) and printed by `close` with a "bench" member, so stdout stays one JSON
    document whatever happens (an error, an interrupt).
    """

    def __init__(self, fmt: str, save_dir: Path | None = None, html: str | None = None) -> None:
        self.fmt = fmt
        self.html = html  # --bench-html FILE: the before/after page
        self.save_dir = default_results_dir() if save_dir is None else save_dir
        self.before: BenchResult | None = None
        self.after: BenchResult | None = None
        self.before_error: BenchError | None = None
        self.speedup: Speedup | None = None
        self.errors: list[str] = []
        self.saved: list[str] = []
        self.interrupted: str | None = None
        self.document: dict[str, Any] | None = None

    def measure(self, host: Host, status: Any, phase: str, *, state: str) -> BenchResult | None:
        """One GELI-on-md measurement; phase "before", "after" or "as it is".

        A failure is a message (enable goes on); Ctrl-C/SIGTERM ends enable with 130 after saying
        what cleanup did and `state` (what enable had changed by then).
        """
        from bsdcrypt.bench import measure

        what = {"before": "before enabling", "after": "after enabling"}.get(phase, "with the driver as it is")
        typer.echo(
            f"--bench: measuring {what} (GELI on a swap-backed md device, then the bare md ceiling)...", err=True
        )
        try:
            result = measure(host, BenchParams(), HostFacts.from_status(status))
        except BenchInterrupted as exc:
            self.interrupted = f"{exc}; {state}"
            typer.echo(_error_line(exc), err=True)
            typer.echo(f"bsdcrypt: {state}", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from exc
        except BenchError as exc:
            if phase == "before":
                self.before_error = exc
            self.errors.append(f"{phase}: {exc}")
            typer.echo(f"--bench ({what}): {exc}", err=True)
            return None
        result.context = f"enable --bench: {phase}"
        try:
            self.saved.append(str(save_record(result, self.save_dir)))
        except OSError as exc:
            self.errors.append(f"could not save the {phase} record: {exc}")
            typer.echo(_error_line(f"could not save the record: {exc}"), err=True)
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

    def no_before_reason(self, status: Any, *, loads_driver: bool, changes: bool) -> str:
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

    def report(self, why_no_before: str) -> None:
        """Text: the before/after table (or what there is). JSON: kept for `close`."""
        if self.after is not None:
            self.speedup = compare(self.before, self.after, why_no_before)
        if self.html:
            self.write_html()
        if self.fmt != "text":
            return
        saved = "".join(f"saved: {p}\n" for p in self.saved)
        if self.after is not None:
            typer.echo(render_table(self.after, self.speedup) + saved, nl=False)
        elif self.before is not None:
            text = render_table(self.before) + "  no 'after' measurement (it failed; see above)\n"
            typer.echo(text + saved, nl=False)

    def write_html(self) -> None:
        """--bench-html FILE: the runs there are (before, after or as it is), the speedup and its note."""
        from bsdcrypt.cli import write_report
        from bsdcrypt.render.html import BenchRun, bench_page, speedup_texts

        runs = [BenchRun(k := (r.context or "run").split(": ")[-1], r, key=k)
                for r in (self.before, self.after) if r is not None]
        if not runs:
            return
        host = runs[0].result.host.hostname or "?"
        note = self.speedup.note if self.speedup is not None else ""
        page = bench_page(runs, title=f"bsdcrypt enable --bench on {host}", command="enable --bench",
                          source=host + "".join(f"; saved {p}" for p in self.saved),
                          ratios=[f"speedup, {t}" for t in speedup_texts(self.speedup)], note=note)
        try:
            write_report(page, self.html)
        except OSError as exc:
            self.errors.append(f"could not write {self.html}: {exc}")
            typer.echo(f"bsdcrypt: could not write {self.html}: {exc}", err=True)
            return
        if self.fmt == "text":
            typer.echo(f"bench report: {self.html}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "before": None if self.before is None else self.before.to_record(),
            "after": None if self.after is None else self.after.to_record(),
            "speedup": None if self.speedup is None else self.speedup.to_dict(),
            "saved": list(self.saved),
            "errors": list(self.errors),
            "interrupted": self.interrupted,
        }

    def close(self) -> None:
        """JSON: print enable's document with the "bench" member (once)."""
        if self.fmt == "json" and self.document is not None:
            doc, self.document = self.document, None
            typer.echo(json.dumps({**doc, "bench": self.to_dict()}, indent=2))


def _host_help() -> str:
    from bsdcrypt.cli.options import literal_help

    return literal_help("local (default), or [user@]host[:port] over SSH (a recording cannot run a bench).")


def _error_line(message: object) -> str:
    from bsdcrypt.cli.options import error_line

    return error_line(message)


def _nonempty(value: Any) -> Any:
    from bsdcrypt.cli.options import nonempty

    return nonempty(value)


def register(app: typer.Typer) -> None:
    @app.command()
    def bench(
        records: Annotated[
            list[str] | None,
            typer.Argument(
                help="With --compare: saved bench records (RECORD.json) or folders of them.", show_default=False
            ),
        ] = None,
        host: Annotated[
            str,
            typer.Option(
                "--host",
                "-H",
                help=_host_help(),
                envvar="BSDCRYPT_HOST",
                callback=_nonempty,
            ),
        ] = "local",
        size: Annotated[int, typer.Option("--size", help="md size in MiB (swap-backed: uses RAM).")] = 1024,
        keylen: Annotated[int, typer.Option("--keylen", help="AES-XTS key length: 128 or 256.")] = 128,
        sectorsize: Annotated[int, typer.Option("--sectorsize", help="GELI sector size.")] = 4096,
        runtime: Annotated[int, typer.Option("--runtime", help="fio seconds per direction.")] = 10,
        bs: Annotated[str, typer.Option("--bs", help="fio block size.")] = "1m",
        iodepth: Annotated[int, typer.Option("--iodepth", help="fio I/O depth.")] = 16,
        numjobs: Annotated[int, typer.Option("--numjobs", help="fio jobs (0: number of CPUs).")] = 0,
        ioengine: Annotated[
            str, typer.Option("--ioengine", help="fio engine (no libaio on FreeBSD).")
        ] = "posixaio",
        read: Annotated[bool, typer.Option("--read/--no-read", help="Also measure reads.")] = True,
        ceiling: Annotated[
            bool, typer.Option("--ceiling/--no-ceiling", help="Also measure the bare md.")
        ] = True,
        repeat: Annotated[int, typer.Option("--repeat", help="Runs per measurement (median, spread).")] = 1,
        userland: Annotated[
            bool,
            typer.Option(
                "--userland",
                help="Only run openssl speed -evp (AES-GCM vs ChaCha20-Poly1305, AES-NI masked) and advise "
                "on TLS/SSH ciphers; needs no root.",
            ),
        ] = False,
        cleanup: Annotated[
            bool,
            typer.Option(
                "--cleanup",
                help="Only remove md/GELI devices an interrupted bench left (-f json|yaml: a document of "
                "what was removed and left alone).",
            ),
        ] = False,
        compare: Annotated[
            bool,
            typer.Option(
                "--compare",
                help="Run no bench: chart the saved RECORDS side by side (table: Unicode bars; -f html: one page).",
            ),
        ] = False,
        save: Annotated[
            str | None,
            typer.Option(
                "--save", help="Where JSON records go (default ~/.local/share/bsdcrypt/bench).", callback=_nonempty
            ),
        ] = None,
        no_save: Annotated[bool, typer.Option("--no-save", help="Do not write a JSON record.")] = False,
        fmt: Annotated[
            str,
            typer.Option(
                "--format",
                "-f",
                help="table, json, yaml, prometheus (textfile collector) or html (one page).",
                autocompletion=complete_bench_format,
            ),
        ] = "table",
        output: Annotated[
            str | None,
            typer.Option(
                "--output",
                "-o",
                help="Write the report to FILE (atomically if a regular file), e.g. DIR/bsdcrypt_bench.prom.",
                callback=_nonempty,
            ),
        ] = None,
    ) -> None:
        """Measure GELI (AES-XTS) on a swap-backed md device with fio, against the bare md ceiling.

        Needs root and fio (pkg install fio). Touches only the md devices it creates.

        Cleans up on success, error, Ctrl-C and SIGTERM; removes what a crashed run of its own left.

        With --compare it runs nothing and charts saved records instead (bench --compare DIR).

        Exit status: 0 done, 3 error, 130 interrupted.
        """
        from bsdcrypt import bench as engine
        from bsdcrypt.cli.options import fail, write_report
        from bsdcrypt.hosts.open import parse_host_spec

        if compare:
            _compare(records or [], fmt, output)
            raise typer.Exit(0)
        if records:
            fail(f"unexpected argument {records[0]!r}: only bench --compare reads records")
        if fmt not in FORMATS:
            fail(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
        if userland and fmt == "prometheus":
            fail("--userland has no Prometheus metrics; use --format json or yaml")
        if cleanup and fmt == "prometheus":
            fail("--cleanup has no Prometheus metrics; use --format table, json or yaml")
        if cleanup and fmt == "html":  # it removes leftovers and says so in a line: nothing to chart or hand on
            fail("--cleanup has no HTML report (it says in a line what it removed); use --format table, json or yaml")
        if host.startswith("replay:"):
            fail("bench measures a live host (local or over SSH); a recording cannot run commands")
        if output is not None and output != "-":
            from bsdcrypt.errors import BsdcryptError
            from bsdcrypt.fsutil import check_output_path

            try:
                check_output_path(output)  # before the bench runs, not after every fio run is done
            except BsdcryptError as exc:
                fail(str(exc))
        h = parse_host_spec(host)
        from bsdcrypt.render.text import visible

        progress = (lambda msg: typer.echo(f"  {visible(msg, None)}", err=True)) if fmt == "table" else None
        try:
            if userland:
                # Userland only: openssl speed needs neither root nor fio nor an md device.
                try:
                    facts = _facts_for(h)
                except NotFreeBSD as exc:  # openssl speed runs anywhere
                    facts = exc.facts
                x86 = facts is None or facts.arch in (None, "amd64", "i386", "x86_64")
                started = _now()
                u = engine.userland(h, x86=x86)
                where = None
                if not no_save:
                    hf = facts or HostFacts(hostname=h.name)
                    record = userland_record(u, hf, started, _now())
                    try:
                        directory = Path(save).expanduser() if save else default_results_dir()
                        where = save_json(record, directory, started, hf.hostname, "-userland")
                    except OSError as exc:
                        typer.echo(_error_line(f"could not save the record: {exc}"), err=True)
                if fmt == "table":
                    text = render_userland(u) + (f"saved: {where}\n" if where else "")
                elif fmt == "html":
                    from bsdcrypt.render.html import userland_page

                    text = userland_page(u, facts, source=h.spec, saved=str(where) if where else "")
                else:
                    text = _dump(dataclasses.asdict(u), fmt)
                write_report(text, output)
                raise typer.Exit(0)
            if cleanup:
                report = engine.cleanup_leftovers(h, progress)
                if fmt in ("json", "yaml"):
                    write_report(_dump(cleanup_document(report), fmt), output)
                elif output is not None and output != "-":
                    write_report(report.summary() + "\n", output)
                if not report.ok:
                    fail(report.summary())
                if fmt == "table" and (output is None or output == "-"):
                    typer.echo(report.summary())
                raise typer.Exit(0)
            params = BenchParams(
                size_mib=size,
                keylen=keylen,
                sectorsize=sectorsize,
                runtime_s=runtime,
                bs=bs,
                iodepth=iodepth,
                numjobs=numjobs or None,
                ioengine=ioengine,
                directions=("write", "read") if read else ("write",),
                repeat=repeat,
                ceiling=ceiling,
            )
            try:
                facts = _facts_for(h)
            except NotFreeBSD as exc:
                fail(exc.why)
            result = engine.measure(h, params, facts, progress)
        except BenchInterrupted as exc:
            typer.echo(_error_line(exc), err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from exc
        except BenchError as exc:
            fail(str(exc))
        finally:
            h.close()
        saved: Path | None = None
        if not no_save:
            try:
                saved = save_record(result, Path(save).expanduser() if save else default_results_dir())
            except OSError as exc:
                typer.echo(_error_line(f"could not save the record: {exc}"), err=True)
        if fmt == "table":
            write_report(render_table(result) + (f"saved: {saved}\n" if saved else ""), output)
        elif fmt == "prometheus":
            import time

            from bsdcrypt.render.prometheus import render_bench

            write_report(render_bench(result.to_record(), h.spec, timestamp=time.time()), output)
        elif fmt == "html":
            from bsdcrypt.render.html import BenchRun, bench_page

            page = bench_page([BenchRun(result.host.hostname or h.spec, result)], title="bsdcrypt bench",
                              command="bench", source=h.spec + (f"; saved {saved}" if saved else ""))
            write_report(page, output)
        else:
            write_report(_dump(result.to_record(), fmt), output)
