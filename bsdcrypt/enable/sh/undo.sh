# shellcheck shell=sh disable=SC2154
# The undo of a write of this run, when a later file of the same run failed: under the same lock, if the
# file still holds exactly what this run wrote, rename the backup (a `cp -p` copy: same bytes, owner,
# mode and times) back over it; a file this run created is removed. Run like write.sh, after lib.sh.
set -u
samepath "left as it is"
[ -f "$TGT" ] || die "$F is gone"
cur=$(cksum < "$TGT") || die "cannot read $F"
if [ -n "$BAK" ]; then
  case $BAK in "$TGT".bsdcrypt-*) ;; *) die "$BAK is not a backup of $F" ;; esac
  [ "$cur" = "$CKSUM" ] || die "$F changed since bsdcrypt wrote it; left as it is (the original is $BAK)"
  [ -f "$BAK" ] || die "the backup $BAK is gone"
  err=$(mv -f "$BAK" "$TGT" 2>&1) || die "cannot rename $BAK over $F: ${err##*: }"
else
  [ "$cur" = "$CKSUM" ] || die "$F changed since bsdcrypt created it; left as it is"
  err=$(rm -f "$TGT" 2>&1) || die "cannot remove $F: ${err##*: }"
fi
syncf "$DIR" || die "put back, but cannot fsync the directory $DIR"
echo "bsdcrypt-write: ok"
