#!/usr/bin/env bash
# The results folders of runs (`make bench`, the GPU check): one place that names, creates
# and finds them.
#   results-dir.sh create ROOT SLUG   creates ROOT/SLUG_<yyyymmdd-hhmmss>-<4 hex digits> (UTC)
#                                     and prints its path. mkdir without -p: it fails on a folder
#                                     that exists, so two runs started in the same second (two
#                                     terminals, two nodes of a job array on a shared file system
#                                     with the same host slug) never share one; on a collision it
#                                     tries another suffix. ROOT is created if missing.
#   results-dir.sh runs ROOT          the run folders under ROOT (those with a context.txt whose
#                                     name does not start compare_ or guide_: never a comparison
#                                     or a guide), newest first by the run_date in context.txt
#                                     (older names, SLUG_<yyyymmdd-hhmm>, are read alike)
#   results-dir.sh newest ROOT        the first of those (what `make charts` redraws)
# Exit status: 0; 1 when a folder cannot be created or ROOT holds no run; 2 for bad usage.
set -uo pipefail
usage="usage: results-dir.sh create ROOT SLUG | runs ROOT | newest ROOT"

# Run folders under $1, one a line, newest first (names holding a newline are left out).
runs() {
  local d date
  shopt -s nullglob
  for d in "$1"/*/; do
    d=${d%/}
    [[ -f $d/context.txt && $d != *$'\n'* ]] || continue
    case ${d##*/} in compare_* | guide_*) continue ;; esac
    date=$(sed -n 's/^run_date=//p' "$d/context.txt" | head -n 1)
    printf '%s\t%s\n' "${date:-0}" "$d"
  done | sort -r -t $'\t' -k1,1 | cut -f2-
}

case ${1:-} in
  create)
    (($# == 3)) && [[ -n $2 && -n $3 && $3 != */* ]] || { echo "results-dir: $usage" >&2; exit 2; }
    root=$2 slug=$3
    mkdir -p -- "$root" || { echo "results-dir: cannot create $root" >&2; exit 1; }
    for ((try = 0; try < 50; try++)); do
      suffix=$(od -An -N2 -tx1 /dev/urandom 2>/dev/null | tr -d ' \n')
      [[ ${#suffix} == 4 ]] || suffix=$(printf '%04x' $((RANDOM ^ ($$ & 0xffff))))
      dir="$root/${slug}_$(date -u +%Y%m%d-%H%M%S)-$suffix"
      if mkdir -- "$dir" 2>/dev/null; then
        echo "$dir"
        exit 0
      fi
      [[ -e $dir ]] || { echo "results-dir: cannot create $dir" >&2; exit 1; }
    done
    echo "results-dir: no free folder name under $root after 50 tries" >&2
    exit 1 ;;
  runs | newest)
    (($# == 2)) || { echo "results-dir: $usage" >&2; exit 2; }
    list=$(runs "$2")
    [[ -n $list ]] || exit 1
    if [[ $1 == newest ]]; then head -n 1 <<<"$list"; else echo "$list"; fi ;;
  *)
    echo "results-dir: $usage" >&2
    exit 2 ;;
esac
