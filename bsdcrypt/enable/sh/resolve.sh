# shellcheck shell=sh disable=SC2154
# resolve PATH / unresolved RC: every path resolved inside $ROOT the way chroot($ROOT) would see it
# (bsdcrypt/enable/remote.py says why and how). Shared by the reads and the safe write; ROOT is set by
# the script this is part of.
unset CDPATH
resolve() {
  case $1 in
    "$ROOT") rest=/ ;;
    "$ROOT"/*) rest=${1#"$ROOT"} ;;
    *) return 2 ;;
  esac
  R=
  if [ -n "$ROOT" ]; then
    R=$(cd -P -- "$ROOT" 2>/dev/null && pwd -P) || return 3
    [ "$R" != / ] || R=
  fi
  cur=; n=0
  while [ -n "$rest" ]; do
    c=${rest%%/*}
    case $rest in */*) rest=${rest#*/} ;; *) rest= ;; esac
    case $c in
      '' | .) continue ;;
      ..)
        if [ -z "$cur" ]; then
          [ -z "$ROOT" ] || return 2
        else
          [ -d "$R$cur" ] || return 3
          cur=${cur%/*}
        fi
        continue ;;
    esac
    if [ -L "$R$cur/$c" ]; then
      n=$((n + 1)); [ "$n" -le 32 ] || return 1
      l=$(readlink -- "$R$cur/$c") || return 3
      [ -n "$l" ] || return 3
      case $l in /*) cur= ;; esac
      rest=$l/$rest
    else
      cur=$cur/$c
    fi
  done
  p=$R${cur:-/}
  if [ -n "$ROOT" ]; then
    d=${p%/*}; [ -n "$d" ] || d=/
    if q=$(cd -P -- "$d" 2>/dev/null && pwd -P); then [ "$q" = "$d" ] || return 2; fi
  fi
  printf '%s\n' "$p"
}
unresolved() {
  case $1 in
    1) echo "the symbolic links on its path loop (more than 32 followed)" ;;
    2) echo "a symbolic link on its path leads outside $ROOT (refused: --root never touches the host's own files)" ;;
    *) echo "a symbolic link on its path cannot be followed" ;;
  esac
}
