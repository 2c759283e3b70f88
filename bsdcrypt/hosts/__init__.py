"""Hosts: the one seam through which bsdcrypt reads or changes a machine.

base.py      the Host protocol, RunResult, the one command line every host runs
local.py     this machine (subprocess)
verbose.py   -v: a wrapper that logs every command
spec.py      the grammar of a host: local, replay:FILE|NAME, [user@]host[:port]
open.py      the only place that turns a spec into a Host of the right kind

Recordings (ReplayHost, bsdcrypt.recording) and SSH (SSHHost, bsdcrypt.ssh) are built on base and
spec; only open.py imports them.
"""
