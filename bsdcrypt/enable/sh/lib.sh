# shellcheck shell=sh disable=SC2154
# The safe write's helpers (bsdcrypt/enable/act.py): F, TGT and DIR are set by the script this is part of.

# die MESSAGE: one line on stderr, prefixed so that bsdcrypt knows the snippet said why it stopped.
die() { printf 'bsdcrypt-write: %s\n' "$*" >&2; exit 1; }

# syncf PATH: fsync(1) on FreeBSD (a file or a directory); else sync PATH (coreutils >= 8.24); else sync.
syncf() { if command -v fsync >/dev/null 2>&1; then fsync "$1"; else sync "$1" 2>/dev/null || sync; fi; }

# attrs FILE: its mode (the 10 characters of `ls -l`, so an ACL or label mark does not count), uid and
# gid, numerically (POSIX ls -n).
# shellcheck disable=SC2012  # ls -n is POSIX; find -printf is not
attrs() { ls -lnd -- "$1" | awk '{ print substr($1, 1, 10), $3, $4 }'; }

# samepath WHAT: $DIR and $TGT are still the link-free path `resolve` found (no link appeared on it
# since), so the lock, backup, temp file and rename stay there; else stop, saying WHAT happens now.
samepath() {
  if [ -L "$TGT" ] || [ "$(cd -P -- "$DIR" 2>/dev/null && pwd -P)" != "$DIR" ]; then
    die "a symbolic link appeared on the path of $F since it was resolved ($TGT); $1"
  fi
}
