# shellcheck shell=sh disable=SC2154
# The safe write of one file, run under the lock (wrapper.sh) in a fresh /bin/sh -c after lib.sh; the
# new content is on stdin. F, TGT, DIR, BASE, EXISTED, CKSUM, NEWSUM and CRASH come from the wrapper's
# environment. Every step and why: docs/enable.md ("The safe write").
set -u
samepath "nothing written, run again"
if [ "$EXISTED" = 1 ]; then
  [ -f "$TGT" ] || die "$F no longer exists (or is not a regular file)"
  [ -r "$TGT" ] || die "cannot read $F: permission denied"
  cur=$(cksum < "$TGT") || die "cannot read $F"
  [ "$cur" = "$CKSUM" ] || die "$F changed since bsdcrypt read it; nothing written, run again"
  [ -w "$TGT" ] || die "cannot write $F: permission denied or read-only file (run as root?)"
else
  [ ! -e "$TGT" ] || die "$F appeared since bsdcrypt read it; nothing written, run again"
fi
[ -w "$DIR" ] || die "cannot write in $DIR: permission denied or read-only file system (run as root?)"
# Until the rename succeeds, a failure removes what this run created (temp file and backup): the
# host is left as it was. A crash (SIGKILL) can leave them; the loader reads neither.
bak=; btmp=; tmp=
trap 'rm -f ${tmp:+"$tmp"} ${btmp:+"$btmp"} ${bak:+"$bak"}' EXIT
if [ "$EXISTED" = 1 ]; then
  # The backup is written as carefully as the file: under a temporary name, checked complete (its
  # checksum is the one bsdcrypt read: a full file system gives a short copy), fsync'ed, and only
  # then renamed to its name. A failed or partial backup is removed (trap) and nothing is edited.
  want=$(attrs "$TGT")
  b="$TGT.bsdcrypt-$(date -u +%Y%m%dT%H%M%SZ)"
  [ -e "$b" ] && b="$b.$$"
  btmp=$(mktemp "$DIR/.$BASE.bsdcrypt-backup.XXXXXX" 2>/dev/null) ||
    die "cannot create the backup of $F in $DIR (full or read-only file system?); nothing changed"
  err=$(cp -p "$TGT" "$btmp" 2>&1) || die "cannot write the backup of $F: ${err##*: }; nothing changed"
  [ "$(cksum < "$btmp")" = "$CKSUM" ] ||
    die "the backup of $F is incomplete (full file system?); it was removed and nothing changed"
  # cp -p run by a user who is not root silently gives the copy that user's owner: check.
  [ "$(attrs "$btmp")" = "$want" ] || die "cannot keep the owner, group and mode of $F on its backup (run as root?)"
  syncf "$btmp" || die "cannot fsync the backup of $F; nothing changed"
  err=$(mv -f "$btmp" "$b" 2>&1) || die "cannot name the backup $b: ${err##*: }; nothing changed"
  bak=$b; btmp=
fi
tmp=$(mktemp "$DIR/.$BASE.bsdcrypt.XXXXXX" 2>/dev/null) || die "cannot create a temporary file in $DIR; nothing changed"
if [ "$EXISTED" = 1 ]; then
  err=$(cp -p "$TGT" "$tmp" 2>&1) || die "cannot copy $F's owner and mode: ${err##*: }; nothing changed"
  [ "$(attrs "$tmp")" = "$want" ] || die "cannot keep the owner, group and mode of $F (run as root?)"
else
  chmod 644 "$tmp" || die "cannot make the new $F mode 0644"
fi
err=$(cat 2>&1 > "$tmp") || die "cannot write the new content of $F: ${err##*: }; nothing changed"
[ "$(cksum < "$tmp")" = "$NEWSUM" ] ||
  die "the new content of $F was not written in full (full file system?); nothing changed"
syncf "$tmp" || die "cannot fsync the new content of $F"
if [ "$CRASH" = 1 ]; then kill -KILL $$; fi  # the tests: a crash right before the rename
err=$(mv -f "$tmp" "$TGT" 2>&1) || die "cannot rename the new content over $F: ${err##*: }"
kept=${bak:--}; tmp=; bak=
trap - EXIT
# From here on the new content is in place: say so first, so that a failure after this line (or a
# cut connection) is known to have changed the file, and which backup holds the original.
printf '%s %s\n%s\n' "bsdcrypt-write: renamed" "$kept" "$TGT"
syncf "$DIR" || die "renamed, but cannot fsync the directory $DIR"
echo "bsdcrypt-write: ok"
cat -- "$TGT"
