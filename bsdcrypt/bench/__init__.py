"""`bsdcrypt bench`: GELI on a swap-backed md(4) device, measured with fio.

Every action on the host is one `Host.run` call, named by a step, so a failure says
which step failed. The sequence for one measurement of one target:

    mdconfig -a -t swap -s SIZEm -L bsdcrypt-bench      -> prints "mdN"
    geli onetime -e AES-XTS -l 128 -s 4096 mdN          (target "geli" only)
    geli list mdN.eli                                   -> the Crypto: field
    fio ... --filename=/dev/mdN.eli --rw=write ...      (then --rw=read)
    geli detach mdN.eli                                 (target "geli" only)
    mdconfig -d -u N

The target "md" (no GELI) is the ceiling: what the same md device does without crypto.

Safety rules, enforced in one place (`devices.Devices`):
* only md units this run created (the name mdconfig printed, `^md[0-9]+$`, not in the
  list taken before) are ever named in a command, and `.eli` only on top of those;
* cleanup runs on success, on any failing step, on KeyboardInterrupt and on SIGTERM
  (turned into an exception while a bench runs); it retries with force, verifies with
  `mdconfig -l`/`test -c`, and reports what could not be removed;
* devices carry the md label `bsdcrypt-bench` (mdconfig -L) and are also listed in
  /var/run/bsdcrypt-bench.units with the boot time, the owner (`<pid>@<machine>` of the
  bsdcrypt that made them), type and size. The next run removes a crashed run's leftovers
  (labelled, owner gone) and refuses while a bench still runs or ownership is in doubt;
  `bench --cleanup` also removes labelled units no entry claims. Without labels (old
  mdconfig) the unit is chosen, recorded and then created with `-u N`, and a state entry
  counts only while its unit is a swap md of the recorded size.

The pieces (import each name from the module that defines it; this package re-exports nothing):
model (parameters, step names, errors, results, compare), state (the state file's lines and owners),
steps (commands run under a step name), ledger (this run's state-file lines), devices (which devices
a run may name; their lifecycle), preflight, leftovers, cleanup, session (the pieces of one bench put
together), run (measure, cleanup_leftovers), speed (the one `openssl speed` measurement), openssl
(`bench --userland`: speed figures and cipher advice), records (saved records), facts (the probe's view
of the host), flow (one bench run, returned as data for the CLI).
"""
