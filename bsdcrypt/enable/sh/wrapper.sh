# shellcheck shell=sh disable=SC2154
# The lock around a write or an undo (bsdcrypt/enable/act.py), after resolve.sh and lib.sh. Set before it:
# F, EXISTED, CKSUM, NEWSUM, ROOT, BAK, CRASH, WAIT (seconds), BUSY (what a busy lock means) and BODY (the
# locked steps: lib.sh with write.sh or undo.sh).
TGT=$(resolve "$F") || { rc=$?; die "cannot write $F: $(unresolved $rc)"; }
DIR=$(dirname -- "$TGT"); BASE=$(basename -- "$TGT")
[ -d "$DIR" ] || die "directory $DIR does not exist"
[ -w "$DIR" ] || die "cannot write in $DIR: permission denied or read-only file system (run as root?)"
samepath "nothing changed, run again"
export F TGT DIR BASE EXISTED CKSUM NEWSUM BAK CRASH
LOCK="$DIR/.bsdcrypt.lock"
# The lock tool runs BODY in a fresh /bin/sh -c (parsed alone, never by a login shell) while it holds
# the lock, and exits with BODY's status, or 75 (EX_TEMPFAIL) when the lock was not had within WAIT
# seconds: lockf(1) does so itself (usr.bin/lockf/lockf.c: errx(EX_TEMPFAIL, "already locked")),
# GNU flock(1) with -E 75. BODY never exits 75 (its errors are `die`, status 1), so 75 means BODY
# did not run: nothing was written, and the error says so (a certain failure, not a cut-off one).
if command -v lockf >/dev/null 2>&1; then
  # -k: keep the lock file. Without it lockf(1) unlinks the file on release, so a waiter can lock
  # the unlinked file while a newcomer locks a new one (two holders), and waiters are not served in
  # order (usr.bin/lockf/lockf.c). Kept, every run locks the same file and waits its turn.
  lockf -k -t "$WAIT" "$LOCK" /bin/sh -c "$BODY" bsdcrypt-write; rc=$?
elif command -v flock >/dev/null 2>&1; then
  flock -E 75 -w "$WAIT" "$LOCK" /bin/sh -c "$BODY" bsdcrypt-write; rc=$?
else
  i=0
  until mkdir "$LOCK.d" 2>/dev/null; do
    i=$((i + 1)); [ "$i" -lt "$WAIT" ] || die "another bsdcrypt holds $LOCK.d (remove it if none is running); $BUSY"
    sleep 1
  done
  ( /bin/sh -c "$BODY" bsdcrypt-write ); rc=$?
  rmdir "$LOCK.d"
fi
[ "$rc" -ne 75 ] || die "another bsdcrypt holds the lock on $F; $BUSY"
exit $rc
