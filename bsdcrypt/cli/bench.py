"""`bsdcrypt bench`: one subcommand per job, each options -> one flow -> one renderer -> exit code.

    bench geli      GELI on a swap-backed md with fio, against the bare md (the default: `bench [OPTIONS]`)
    bench userland  userland OpenSSL (`openssl speed`), AES-NI as it runs and masked   (was `bench --userland`)
    bench cleanup   remove what an interrupted bench left                                (was `bench --cleanup`)
    bench compare   chart saved records side by side                                     (was `bench --compare`)

The old spellings keep working: `BenchGroup` turns them into the subcommand before click parses.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from bsdcrypt.bench import facts as host_facts
from bsdcrypt.bench import flow as bench_flow
from bsdcrypt.bench.model import BenchError, BenchInterrupted, BenchParams
from bsdcrypt.bench.records import default_results_dir
from bsdcrypt.cli.completion import bench_format_completion
from bsdcrypt.cli.options import MARKUP_MODE, SSHOpt, error_line, fail, literal_help, nonempty, write_report
from bsdcrypt.hostapi import Host
from bsdcrypt.render.serialize import dump

EXIT_INTERRUPTED = 130
GELI_FORMATS = ("table", "json", "yaml", "prometheus", "html")
USERLAND_FORMATS = ("table", "json", "yaml", "html")
CLEANUP_FORMATS = ("table", "json", "yaml")
COMPARE_FORMATS = ("table", "json", "yaml", "html")

JOBS = ("geli", "userland", "cleanup", "compare")
# The old flags that chose a job, in the order they won when several were given.
OLD_FLAGS = {"--compare": "compare", "--userland": "userland", "--cleanup": "cleanup"}


def job_args(args: list[str], completing: bool = False) -> list[str]:
    """The arguments of `bench` with the job first: `bench [OPTIONS]` is `bench geli [OPTIONS]`, and
    `bench --userland|--cleanup|--compare ...` is `bench userland|cleanup|compare ...`. Two old flags at
    once are a usage error (they were two commands). While the shell completes, `bench` alone stays a
    group, so that the jobs are offered."""
    if args and (args[0] in JOBS or args[0] == "--help"):
        return args
    if not args:
        return [] if completing else ["geli"]
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in OLD_FLAGS]
    if len(set(flags)) > 1:
        fail(f"{' and '.join(sorted(set(flags)))} are two jobs: give one (bench {' | '.join(JOBS)})")
    job = OLD_FLAGS[flags[0]] if flags else "geli"
    return [job, *(a for i, a in enumerate(args) if i >= end or a not in OLD_FLAGS)]


def _options(command: Any) -> dict[str, bool]:
    """Every spelling of a command's options -> whether it takes a value."""
    return {o: not (p.is_flag or p.count) for p in command.params if p.param_type_name == "option"
            for o in (*p.opts, *p.secondary_opts)}


def without_foreign(args: list[str], mine: dict[str, bool], geli: dict[str, bool]) -> list[str]:
    """The old spellings gave every option to every job, and a job ignored the GELI bench's options
    (`bench --cleanup --no-save`): drop those (with their value) that the chosen job does not have."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        name = arg.partition("=")[0]
        if arg == "--":
            out += args[i:]
            break
        if arg.startswith("-") and name not in mine and name in geli:
            skip = geli[name] and "=" not in arg
            continue
        out.append(arg)
    return out


class BenchGroup(TyperGroup):
    """The `bench` group: reads the old flags as the job they chose."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        completing = bool(ctx.resilient_parsing)
        new = job_args(list(args), completing=completing)
        if new and new[0] in ("userland", "cleanup", "compare") and (not args or args[0] != new[0]):
            new = [new[0], *without_foreign(new[1:], _options(self.commands[new[0]]), _options(self.commands["geli"]))]
        return super().parse_args(ctx, new)


bench_app = typer.Typer(
    name="bench",
    cls=BenchGroup,
    rich_markup_mode=MARKUP_MODE,
    help="Measure GELI (the default job) or userland OpenSSL, clean up after a bench, or compare saved runs.\n\n"
    "`bench [OPTIONS]` is `bench geli [OPTIONS]`; the old flags `--userland`, `--cleanup` and `--compare` "
    "still choose the job.\n\nExit status: 0 done, 3 error, 130 interrupted.",
)


def _host_help() -> str:
    return literal_help("local (default), or [user@]host[:port] over SSH (a recording cannot run a bench).")


def _format_help(formats: tuple[str, ...]) -> str:
    return ", ".join(formats[:-1]) + f" or {formats[-1]}."


HostOpt = Annotated[
    str,
    typer.Option("--host", "-H", help=_host_help(), envvar="BSDCRYPT_HOST", callback=nonempty, metavar="HOST"),
]
SaveOpt = Annotated[
    str | None,
    typer.Option("--save", help="Where JSON records go (default ~/.local/share/bsdcrypt/bench).", callback=nonempty,
                 metavar="DIR"),
]
NoSaveOpt = Annotated[bool, typer.Option("--no-save", help="Do not write a JSON record.")]
OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output", "-o", callback=nonempty, metavar="FILE",
        help="Write the report to FILE (atomically if a regular file), e.g. DIR/bsdcrypt_bench.prom.",
    ),
]


def _check_output(output: str | None) -> None:
    """-o FILE is checked before anything runs, not after every fio run is done."""
    if output is not None and output != "-":
        from bsdcrypt.errors import BsdcryptError
        from bsdcrypt.fsutil import check_output_path

        try:
            check_output_path(output)
        except BsdcryptError as exc:
            fail(str(exc))


@contextmanager
def _bench_errors(h: Host) -> Iterator[None]:
    """A GELI bench or cleanup on `h`: each failure one line with its exit code; the host closed after."""
    try:
        yield
    except host_facts.NotFreeBSD as exc:
        fail(exc.why)
    except BenchInterrupted as exc:
        typer.echo(error_line(exc), err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from exc
    except BenchError as exc:
        fail(str(exc))
    finally:
        h.close()


def _open(host: str, ssh: str = "paramiko") -> Host:
    from bsdcrypt.hosts.open import parse_host_spec

    if host.startswith("replay:"):
        fail("bench measures a live host (local or over SSH); a recording cannot run commands")
    return parse_host_spec(host, ssh)


def on_terminal() -> bool:
    """Whether stderr is a terminal (bench userland shows its progress there, and only there)."""
    return sys.stderr.isatty()


def _lines(enabled: bool) -> Any:
    """Progress lines on stderr (host text through the sanitizer), or None."""
    from bsdcrypt.text import visible

    return (lambda msg: typer.echo(f"  {visible(msg, None)}", err=True)) if enabled else None


def _warn(message: str) -> None:
    typer.echo(error_line(f"warning: {message}"), err=True)


# --------------------------------------------------------------------------- bench geli


@bench_app.command("geli")
def geli(
    records: Annotated[list[str] | None, typer.Argument(hidden=True, show_default=False)] = None,
    host: HostOpt = "local",
    ssh: SSHOpt = "paramiko",
    size: Annotated[int, typer.Option("--size", help="md size in MiB (swap-backed: uses RAM).", metavar="MIB")] = 1024,
    keylen: Annotated[int, typer.Option("--keylen", help="AES-XTS key length: 128 or 256.", metavar="BITS")] = 128,
    sectorsize: Annotated[int, typer.Option("--sectorsize", help="GELI sector size.", metavar="BYTES")] = 4096,
    runtime: Annotated[int, typer.Option("--runtime", help="fio seconds per direction.", metavar="SECONDS")] = 10,
    bs: Annotated[str, typer.Option("--bs", help="fio block size.", metavar="SIZE")] = "1m",
    iodepth: Annotated[int, typer.Option("--iodepth", help="fio I/O depth.", metavar="N")] = 16,
    numjobs: Annotated[int, typer.Option("--numjobs", help="fio jobs (0: number of CPUs).", metavar="N")] = 0,
    ioengine: Annotated[
        str, typer.Option("--ioengine", help="fio engine (no libaio on FreeBSD).", metavar="ENGINE")
    ] = "posixaio",
    read: Annotated[bool, typer.Option("--read/--no-read", help="Also measure reads.")] = True,
    ceiling: Annotated[bool, typer.Option("--ceiling/--no-ceiling", help="Also measure the bare md.")] = True,
    repeat: Annotated[int, typer.Option("--repeat", help="Runs per measurement (median, spread).", metavar="N")] = 1,
    save: SaveOpt = None,
    no_save: NoSaveOpt = False,
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", metavar="FORMAT", autocompletion=bench_format_completion(GELI_FORMATS),
                     help="table, json, yaml, prometheus (textfile collector) or html (one page)."),
    ] = "table",
    output: OutputOpt = None,
) -> None:
    """Measure GELI (AES-XTS) on a swap-backed md device with fio, against the bare md ceiling.

    Needs root and fio (pkg install fio). Touches only the md devices it creates.

    Cleans up on success, error, Ctrl-C and SIGTERM; removes what a crashed run of its own left.

    Exit status: 0 done, 3 error, 130 interrupted.
    """
    if records:
        fail(f"unexpected argument {records[0]!r}: only bench compare (bench --compare) reads records")
    if fmt not in GELI_FORMATS:
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(GELI_FORMATS)}")
    _check_output(output)
    h = _open(host, ssh)
    params = BenchParams(
        size_mib=size, keylen=keylen, sectorsize=sectorsize, runtime_s=runtime, bs=bs, iodepth=iodepth,
        numjobs=numjobs or None, ioengine=ioengine, directions=("write", "read") if read else ("write",),
        repeat=repeat, ceiling=ceiling,
    )
    with _bench_errors(h):
        run = bench_flow.run_measure(h, params, save=save, no_save=no_save, progress=_lines(fmt == "table"))
    result, saved = run.result, run.saved.path
    if run.saved.error:
        typer.echo(error_line(run.saved.error), err=True)
    if fmt == "table":
        from bsdcrypt.render.bench import render_table

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
        write_report(dump(result.to_record(), fmt), output)


# --------------------------------------------------------------------------- bench userland


@bench_app.command("userland")
def userland(
    host: HostOpt = "local",
    ssh: SSHOpt = "paramiko",
    save: SaveOpt = None,
    no_save: NoSaveOpt = False,
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", metavar="FORMAT", autocompletion=bench_format_completion(USERLAND_FORMATS),
                     help=_format_help(USERLAND_FORMATS)),
    ] = "table",
    output: OutputOpt = None,
) -> None:
    """Run openssl speed -evp (AES-GCM vs ChaCha20-Poly1305, AES-NI as it runs and masked) and advise on
    TLS/SSH ciphers; needs no root, runs anywhere (was: bench --userland).

    Three interleaved rounds per figure (median); progress on a terminal, and a warning for a figure
    too noisy to trust.

    Exit status: 0 done, 3 error, 130 interrupted.
    """
    if fmt not in USERLAND_FORMATS:
        what = "Prometheus metrics" if fmt == "prometheus" else f"{fmt} report"
        fail(f"bench userland (--userland) has no {what}; use --format {', '.join(USERLAND_FORMATS)}")
    _check_output(output)
    h = _open(host, ssh)
    try:
        u = bench_flow.run_userland(h, save=save, no_save=no_save, progress=_lines(on_terminal()))
    finally:
        h.close()
    for warning in u.result.warnings:
        _warn(warning)
    if u.saved.error:
        typer.echo(error_line(u.saved.error), err=True)
    where = u.saved.path
    if fmt == "table":
        from bsdcrypt.render.bench import render_userland

        text = render_userland(u.result) + (f"saved: {where}\n" if where else "")
    elif fmt == "html":
        from bsdcrypt.render.html import userland_page

        text = userland_page(u.result, u.facts, source=h.spec, saved=str(where) if where else "")
    else:
        text = dump(dataclasses.asdict(u.result), fmt)
    write_report(text, output)


# --------------------------------------------------------------------------- bench cleanup


@bench_app.command("cleanup")
def cleanup(
    host: HostOpt = "local",
    ssh: SSHOpt = "paramiko",
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", metavar="FORMAT", autocompletion=bench_format_completion(CLEANUP_FORMATS),
                     help="table (one line), json or yaml: a document of what was removed and left alone."),
    ] = "table",
    output: OutputOpt = None,
) -> None:
    """Remove the md/GELI devices an interrupted bench left; leave alone those of a bench still running
    or of another machine, and say why (was: bench --cleanup).

    Exit status: 0 done, 3 something left alone or an error, 130 interrupted.
    """
    if fmt == "prometheus":
        fail("bench cleanup (--cleanup) has no Prometheus metrics; use --format table, json or yaml")
    if fmt == "html":  # it removes leftovers and says so in a line: nothing to chart or hand on
        fail("bench cleanup (--cleanup) has no HTML report (it says in a line what it removed); use --format "
             "table, json or yaml")
    if fmt not in CLEANUP_FORMATS:
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(CLEANUP_FORMATS)}")
    _check_output(output)
    h = _open(host, ssh)
    with _bench_errors(h):
        report = bench_flow.run_cleanup(h, progress=_lines(fmt == "table"))
    if fmt in ("json", "yaml"):
        from bsdcrypt.render.bench import cleanup_document

        write_report(dump(cleanup_document(report), fmt), output)
    elif output is not None and output != "-":
        write_report(report.summary() + "\n", output)
    if not report.ok:
        fail(report.summary())
    if fmt == "table" and (output is None or output == "-"):
        typer.echo(report.summary())


# --------------------------------------------------------------------------- bench compare


@bench_app.command("compare")
def compare(
    records: Annotated[
        list[str] | None,
        typer.Argument(help="Saved bench records (RECORD.json) or folders of them.", show_default=False,
                       metavar="RECORD..."),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", metavar="FORMAT", autocompletion=bench_format_completion(COMPARE_FORMATS),
                     help="table (Unicode bars), json, yaml or html (one page)."),
    ] = "table",
    output: OutputOpt = None,
) -> None:
    """Run no bench: chart saved records side by side (was: bench --compare).

    Exit status: 0 done, 3 error.
    """
    from bsdcrypt.bench.records import expand, label, load, same_file
    from bsdcrypt.errors import BsdcryptError
    from bsdcrypt.render.bench import compare_document, ratios, render_compare

    if fmt not in COMPARE_FORMATS:
        fail(f"bench compare has no {fmt} report; choose one of: {', '.join(COMPARE_FORMATS)}")
    if not records:
        fail("bench compare needs bench records: RECORD.json files or a folder of them (they are saved in "
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
        text = dump(compare_document(runs), fmt)
    write_report(text, output)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
