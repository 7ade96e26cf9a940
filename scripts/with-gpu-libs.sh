#!/usr/bin/env bash
# Runs a command with the CUDA libraries of this machine on LD_LIBRARY_PATH:
#   scripts/with-gpu-libs.sh build-device/train --preset tiny
#   scripts/with-gpu-libs.sh --print          # what it found, and exit
# The GPU machine has the CUDA toolkit (cudart, cuBLAS) but cuDNN and NCCL only as the
# pip packages of its PyTorch (site-packages/nvidia/*/lib), where no run path can point
# in advance. For each library it takes the first *regular file* of that name from, in
# order: GPU_LIBS_DIRS (colon-separated, to force a choice), $CUDA_HOME/lib64 (default
# /usr/local/cuda), the site-packages of every python3/python on PATH, and only then a
# search of the local disks (never /proc, /sys, /dev or other mounts) - because a
# directory called libcublas.so.13 (perf's ~/.debug copies) on LD_LIBRARY_PATH breaks
# every program. The staged non-CUDA libraries (device-stage/lib) come first; Debian 12's
# libstdc++, libgcc_s and libz (device-stage/lib/fallback/<name>) only where the machine's
# own copy lacks a symbol version the programs need (device-stage/lib/needs.txt), so that
# Python and torch keep the machine's (newer) ones. GPU_LIBS_STAGE: another stage folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
wanted=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2)

print_only=0
if [[ ${1:-} == --print ]]; then
  print_only=1
  shift
elif [[ $# -eq 0 || ${1:-} == --help || ${1:-} == -h ]]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  [[ $# -eq 0 ]] && exit 2 || exit 0
fi

# Candidate folders, best first, one per line.
candidates() {
  local IFS=:
  for d in ${GPU_LIBS_DIRS:-}; do [[ -n $d ]] && echo "$d"; done
  echo "${CUDA_HOME:-/usr/local/cuda}/lib64"
  local py sp
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" - 2>/dev/null <<'EOF' || true
import site, sys
paths = list(getattr(site, "getsitepackages", lambda: [])())
user = getattr(site, "getusersitepackages", lambda: None)()
if user: paths.append(user)
paths += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
print("\n".join(dict.fromkeys(paths)))
EOF
  done | while read -r sp; do
    for d in "$sp"/nvidia/*/lib; do [[ -d $d ]] && echo "$d"; done
  done
}

declare -A found=()
mapfile -t dirs < <(candidates)
for lib in "${wanted[@]}"; do
  for d in "${dirs[@]}"; do
    # -f follows symlinks and is true only for a regular file, never a directory
    if [[ -f $d/$lib ]]; then found[$lib]=$d; break; fi
  done
done
missing=()
for lib in "${wanted[@]}"; do [[ -n ${found[$lib]:-} ]] || missing+=("$lib"); done
if ((${#missing[@]})) && [[ -z ${GPU_LIBS_NO_SEARCH:-} ]]; then
  # Last resort: the local disks, regular files only, pruning pseudo and other filesystems.
  pattern=()
  for lib in "${missing[@]}"; do pattern+=(-o -name "$lib"); done
  while read -r path; do
    lib=$(basename "$path")
    [[ -z ${found[$lib]:-} && -f $path ]] && found[$lib]=$(dirname "$path")
  done < <(find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run \) -prune \
             -o -type f \( "${pattern[@]:1}" \) -print 2>/dev/null | sort)
fi

# The staged libraries travel packed (scripts/device-stage.sh): unpack them once.
stage=${GPU_LIBS_STAGE:-$root/device-stage}
if [[ -f $stage/lib.tar.gz && ! -d $stage/lib ]]; then
  tmp=$(mktemp -d "$stage/.lib.XXXXXX")
  if tar -xzf "$stage/lib.tar.gz" -C "$tmp"; then mv "$tmp/lib" "$stage/lib" 2>/dev/null || true; fi
  rm -rf "$tmp"
fi

libpath=""
add_dir() { [[ ":$libpath:" == *":$1:"* ]] || libpath=${libpath:+$libpath:}$1; }
[[ -d $stage/lib ]] && add_dir "$stage/lib"

# The machine's own copy of a library, as the loader finds it without our path: its
# cache, then the usual folders.
machine_lib() {
  local path d
  path=$({ ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | awk -v l="$1" '$1 == l && /x86-64/ { print $NF; exit }') || true
  if [[ -z $path ]]; then
    for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 /usr/lib /lib; do
      [[ -f $d/$1 ]] && { path=$d/$1; break; }
    done
  fi
  echo "$path"
}
# A fallback library goes on the path only where the machine's own lacks a needed version
# (every version a library defines is a string in it: no binutils needed there).
notes=()
needs=$stage/lib/needs.txt
if [[ -f $needs ]]; then
  while read -r lib versions; do
    [[ -n $lib ]] || continue
    own=$(machine_lib "$lib")
    lacking=()
    for v in $versions; do
      [[ -n $own ]] && LC_ALL=C grep -qaF "$v" "$own" 2>/dev/null || lacking+=("$v")
    done
    dir=$stage/lib/fallback/${lib%%.so*}
    if ((${#lacking[@]} == 0)); then
      notes+=("$(printf '%-18s the machine'"'"'s own %s (has all %d versions needed)' "$lib" "$own" $(wc -w <<<"$versions"))")
    elif [[ -f $dir/$lib ]]; then
      add_dir "$dir"
      notes+=("$(printf '%-18s staged %s: the machine'"'"'s %s lacks %s' "$lib" "$dir/$lib" "${own:-(none)}" "${lacking[*]}")")
    else # the C library itself cannot be staged: say so before anything fails to start
      notes+=("$(printf '%-18s WARNING: the machine'"'"'s %s lacks %s: the staged programs will not start' \
        "$lib" "${own:-(none)}" "${lacking[*]}")")
    fi
  done <"$needs"
fi
for lib in "${wanted[@]}"; do [[ -n ${found[$lib]:-} ]] && add_dir "${found[$lib]}"; done
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if ((print_only)); then
  for lib in "${wanted[@]}"; do
    where="NOT FOUND"
    [[ -n ${found[$lib]:-} ]] && where=${found[$lib]}/$lib
    printf 'gpu-libs: %-18s %s\n' "$lib" "$where"
  done
  for n in "${notes[@]}"; do echo "gpu-libs: $n"; done
  echo "gpu-libs: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  exit 0
fi
exec "$@"
