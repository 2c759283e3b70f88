# shellcheck shell=sh disable=SC2154
# check F EXISTED: why F cannot be written with its owner, group and mode kept (one line on stdout,
# exit 1), or nothing. No lock and no writes: it runs for every file before any is written, so a
# permission, ownership or read-only problem with any of them changes nothing at all.
me=$(id -u); groups=" $(id -G) "
if [ "$me" = 0 ]; then
  why="read-only file system (or an immutable flag)"; whyf=$why
else
  why="permission denied or read-only file system (run as root?)"; whyf="permission denied (run as root?)"
fi
check() {
  F=$1; EXISTED=$2
  TGT=$(resolve "$F") || { rc=$?; echo "cannot write $F: $(unresolved $rc)"; return 1; }
  DIR=$(dirname -- "$TGT")
  [ -d "$DIR" ] || { echo "directory $DIR does not exist"; return 1; }
  [ -w "$DIR" ] || { echo "cannot write in $DIR: $why"; return 1; }
  if [ "$EXISTED" = 1 ]; then
    [ -f "$TGT" ] || { echo "$F no longer exists (or is not a regular file)"; return 1; }
    [ -r "$TGT" ] || { echo "cannot read $F: permission denied (run as root?)"; return 1; }
    if [ "$me" != 0 ]; then
      # shellcheck disable=SC2046  # split on purpose: mode, uid, gid
      set -- $(attrs "$TGT")
      [ "$2" = "$me" ] || { echo "cannot keep the owner of $F (uid $2) writing as uid $me: run as root"; return 1; }
      case $groups in
        *" $3 "*) ;;
        *) echo "cannot keep the group of $F (gid $3): uid $me is not a member; run as root"; return 1 ;;
      esac
    fi
    [ -w "$TGT" ] || { echo "cannot write $F: $whyf"; return 1; }
  else
    [ ! -e "$TGT" ] || { echo "$F appeared since bsdcrypt read it; nothing written, run again"; return 1; }
  fi
  return 0
}
