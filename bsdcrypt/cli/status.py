"""`status`, `record` and `recordings`: the core commands, registered at start-up (kept light)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bsdcrypt.cli.options import (
    FormatOpt,
    HostOpt,
    OutputOpt,
    SSHOpt,
    TimeoutOpt,
    check_format,
    nonempty,
    spec_inputs,
    write_report,
)
from bsdcrypt.errors import BsdcryptError

if TYPE_CHECKING:
    from bsdcrypt.status import Status


def status(
    host: HostOpt = "local", fmt: FormatOpt = "table", timeout: TimeoutOpt = 120.0, output: OutputOpt = None,
    ssh: SSHOpt = "paramiko",
) -> None:
    """Is kernel AES acceleration available, active and persisted here, and what to do.

    Exit status: 0 OK, 1 warning (action recommended), 2 critical, 3 unknown or error.
    """
    from bsdcrypt.hosts.open import parse_host_spec
    from bsdcrypt.pipeline import status_of
    from bsdcrypt.render.status import FORMATS, render

    def read(spec: str) -> Status:
        target = parse_host_spec(spec, ssh)
        try:
            return status_of(target, timeout=timeout)
        finally:
            target.close()

    check_format(fmt, FORMATS)
    inputs = spec_inputs(host)
    if output is not None and output != "-":
        from bsdcrypt.fsutil import check_output_path

        check_output_path(output, inputs)  # before the probe, which may take a while
    try:
        result = read(host)
    except BsdcryptError as exc:
        if fmt not in DOCUMENT_FORMATS:
            raise  # the table (and html): one line on stderr
        # Monitoring always gets its report, errors included: a Nagios line on stdout, and a textfile
        # that says "unknown" instead of the last good run's metrics going stale; JSON and YAML a
        # document of the same schema whose one finding (host-<kind>) says why.
        from bsdcrypt.status import error_status

        message = " ".join(str(exc).split())
        finding_id, remedy = host_failure(exc)
        result = error_status(host, host, finding_id, message, remedy)
    from bsdcrypt.cli.options import text_width

    write_report(render(result, fmt, text_width(output)), output, inputs)
    raise typer.Exit(result.exit_code)


MONITORING_FORMATS = ("nagios", "prometheus")
DOCUMENT_FORMATS = ("json", "yaml", *MONITORING_FORMATS)  # the formats a program reads: always a report

def host_failure(exc: BsdcryptError) -> tuple[str, str]:
    """(finding id, remedy) of a host `status` could not assess: `host-<kind>` with the kinds and
    remedies of fleet-audit's `fleet-<kind>` (refused, timeout, no-ssh, auth, hostkey-*, garbage...),
    `host-error` when the error names no kind (e.g. a recording that cannot be read)."""
    from bsdcrypt.errors import HostError, ProbeError, kind_of, status_remedy

    kind = "garbage" if isinstance(exc, ProbeError) else kind_of(exc)
    remedy = status_remedy(kind) if isinstance(exc, (HostError, ProbeError)) else None
    if remedy:
        return f"host-{kind}", remedy
    return "host-error", status_remedy("error") or ""


def record(
    output: Annotated[str, typer.Option("--output", "-o", help="File to write, or - for stdout.", callback=nonempty)],
    host: HostOpt = "local",
    ssh: SSHOpt = "paramiko",
    redact: Annotated[
        bool, typer.Option("--redact", help="Mask names, addresses, serials, loader values.")
    ] = False,
    timeout: TimeoutOpt = 120.0,
) -> None:
    """Save what the probe gathers on a host as a YAML recording (docs/recordings.md)."""
    from bsdcrypt.hosts.open import parse_host_spec
    from bsdcrypt.probe import gather
    from bsdcrypt.recording import dump

    inputs = spec_inputs(host)
    if output != "-":
        from bsdcrypt.fsutil import check_output_path

        check_output_path(output, inputs)  # before the probe
    target = parse_host_spec(host, ssh)
    try:
        evidence = gather(target, timeout=timeout)  # recorded as gathered: no parse, no assessment
    finally:
        target.close()
    name = target.name
    if redact:
        from bsdcrypt.assess import assess
        from bsdcrypt.probe import Evidence
        from bsdcrypt.redact import REDACTED_HOST
        from bsdcrypt.redact import redact as redact_evidence

        def reading(ev: Evidence) -> object:  # what the recording says about the host, its name aside
            data = assess(ev, REDACTED_HOST, "redact").to_dict()
            data.pop("host", None)
            return data

        evidence = redact_evidence(evidence, name, reading)
        name = REDACTED_HOST
        from bsdcrypt.redact import redacted_provenance

        text = dump(evidence, name, redacted=True, provenance=redacted_provenance(evidence))
    else:
        text = dump(evidence, name)
    if output == "-":
        typer.echo(text, nl=False)
        return
    from bsdcrypt.fsutil import check_output_path, write_file
    from bsdcrypt.text import visible

    check_output_path(output, inputs)
    write_file(output, text)
    typer.echo(f"recorded {len(evidence.steps)} probe steps of {visible(name)} to {visible(output)}", err=True)


def recordings() -> None:
    """List the recordings shipped with bsdcrypt, one line each: NAME, what it is made of, what it shows.

    Use one with --host replay:NAME. Made of: real (the probe run on a real host), composite (one real
    host's published outputs, the other probe steps derived from FreeBSD's source) or staged (a
    composite changed to show a case no published output shows); each file's header says exactly how.
    """
    from bsdcrypt.cli.options import text_width
    from bsdcrypt.recording import description, shipped
    from bsdcrypt.render.recordings import listing

    rows = [(name, description(path, "made_of"), description(path)) for name, path in shipped()]
    typer.echo(listing(rows, text_width()), nl=False)


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.command()(record)
    app.command()(recordings)
