"""`bsdcrypt bench`: GELI-on-md benchmark (bsdcrypt.bench), results saved and rendered."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer

from bsdcrypt.bench import BenchError, BenchInterrupted, BenchParams
from bsdcrypt.bench import facts as host_facts
from bsdcrypt.bench import flow as bench_flow
from bsdcrypt.bench.records import default_results_dir
from bsdcrypt.cli.completion import complete_bench_format
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
                help="With --compare: saved bench records (RECORD.json) or folders of them.", show_default=False,
                metavar="RECORD...",
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
        from bsdcrypt.text import visible

        progress = (lambda msg: typer.echo(f"  {visible(msg, None)}", err=True)) if fmt == "table" else None
        try:
            if userland:
                u = bench_flow.run_userland(h, save=save, no_save=no_save)
                if u.saved.error:
                    typer.echo(_error_line(u.saved.error), err=True)
                where = u.saved.path
                if fmt == "table":
                    text = render_userland(u.result) + (f"saved: {where}\n" if where else "")
                elif fmt == "html":
                    from bsdcrypt.render.html import userland_page

                    text = userland_page(u.result, u.facts, source=h.spec, saved=str(where) if where else "")
                else:
                    text = _dump(dataclasses.asdict(u.result), fmt)
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
            run = bench_flow.run_measure(h, params, save=save, no_save=no_save, progress=progress)
        except host_facts.NotFreeBSD as exc:
            fail(exc.why)
        except BenchInterrupted as exc:
            typer.echo(_error_line(exc), err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from exc
        except BenchError as exc:
            fail(str(exc))
        finally:
            h.close()
        result, saved = run.result, run.saved.path
        if run.saved.error:
            typer.echo(_error_line(run.saved.error), err=True)
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
