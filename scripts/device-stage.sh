#!/usr/bin/env bash
# Prepares the GPU check on this (GPU-less) machine, in device-stage/ (git ignores it):
#   device-stage/build.tar.xz  the programs and tests, built for sm_90 (in build-device/),
#                          debug info stripped, run path $ORIGIN/../lib and $ORIGIN/../../lib;
#                          packed with xz's large window, which stores the device code every
#                          program links (libkernels) once instead of ~40 times (145 MiB ->
#                          a few MiB); device-check.sh unpacks it into device-stage/build/
#   device-stage/lib.tar.gz  the shared libraries they need that the GPU machine lacks
#                          (Google Benchmark, TurboJPEG, cmocka, OpenBLAS, Open MPI ...;
#                          never CUDA, cuBLAS, cuDNN or NCCL, which scripts/with-gpu-libs.sh
#                          finds there), unpacked there on first use; Debian 12's libstdc++,
#                          libgcc_s and libz apart in lib/fallback/, with lib/needs.txt (the
#                          symbol versions the programs need), used only where the machine's
#                          own lack one (see below)
# Then the device tool: carry ["device-stage"], command "bash scripts/device-check.sh" (its default
# budget, 490 s; timeout_s 550), and for a rerun the --only line its summary prints.
# The working tree and the carried folder must stay under 64 MiB; this checks it.
set -euo pipefail
cd "$(dirname "$0")/.."
limit_mib=${DEVICE_CARRY_LIMIT_MIB:-60}
# Programs linked earlier may lack the run path (make does not track EXTRA_RPATH): relink.
find build-device -maxdepth 2 -type f -perm -u+x ! -name '*.o' ! -name '*.d' -delete 2>/dev/null || true
make -j"$(nproc)" BUILD=build-device CUDA_ARCH="${CUDA_ARCH:-90}" \
  EXTRA_RPATH='$$ORIGIN/../lib $$ORIGIN/../../lib' all

rm -rf device-stage && mkdir -p device-stage/build/tests device-stage/lib
progs=()
for prog in build-device/bench_* build-device/tests/test_* build-device/context \
            build-device/train build-device/datasets build-device/steptime; do
  [[ -x $prog && ! -d $prog && $prog != *.o && $prog != *.d ]] || continue
  dest=device-stage/build/${prog#build-device/}
  cp "$prog" "$dest"
  strip --strip-debug "$dest"  # debug info is most of their size; symbols stay
  progs+=("$dest")
done

# Everything ldd resolves except the C library itself and the CUDA libraries.
if ldd "${progs[@]}" 2>/dev/null | grep -q 'not found'; then
  echo "device-stage: some libraries are not found here:" >&2
  ldd "${progs[@]}" | grep 'not found' | sort -u >&2
  exit 1
fi
# The C++ runtime, libgcc_s and zlib: every machine has its own, usually newer, and the
# twin's Python and torch must load theirs (Debian 12's libstdc++ first on the path would
# hide the GLIBCXX versions a newer torch needs). They are staged apart, one folder each
# (device-stage/lib/fallback/<name>/), with the symbol versions our programs and staged
# libraries need from them (device-stage/lib/needs.txt); scripts/with-gpu-libs.sh puts
# one on the path only where the machine's own copy lacks one of those versions.
fallback_re='/(libstdc\+\+\.so\.6|libgcc_s\.so\.1|libz\.so\.1)$'
for prog in "${progs[@]}"; do ldd "$prog"; done | awk '/=> \// { print $3 }' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux[^/]*)\.so' |
  grep -Ev '/lib(cuda|cudart|cublas|cublasLt|cudnn[^/]*|nccl|nvidia-ml|nvrtc)\.so' |
  while read -r lib; do
    if [[ $lib =~ $fallback_re ]]; then
      name=$(basename "$lib")
      mkdir -p "device-stage/lib/fallback/${name%%.so*}"
      cp -L "$lib" "device-stage/lib/fallback/${name%%.so*}/"
    else
      cp -L "$lib" device-stage/lib/
    fi
  done
# What the staged programs and libraries need from the machine's own libraries: the
# version names of the .gnu.version_r sections (readelf -V), per library file.
stage_needs() {
  local f
  for f in "$@"; do
    readelf -V --wide "$f" 2>/dev/null | awk '
      /Version needs section/ { inr = 1; next }
      /Version (definition|symbols) section/ { inr = 0 }
      inr && /File: / { for (i = 1; i < NF; i++) if ($i == "File:") file = $(i + 1) }
      inr && /Name: / { for (i = 1; i < NF; i++) if ($i == "Name:") print file, $(i + 1) }'
  done | grep -E '^(libstdc\+\+\.so\.6|libgcc_s\.so\.1|libz\.so\.1|libc\.so\.6|libm\.so\.6) ' | sort -u -V |
    awk '{ v[$1] = v[$1] " " $2 } END { for (l in v) print l v[l] }' | sort
}
mapfile -t staged < <(find device-stage/lib -type f)
stage_needs "${progs[@]}" "${staged[@]}" >device-stage/lib/needs.txt
echo "device-stage: what the programs need from the machine (device-stage/lib/needs.txt):"
awk '{ printf "  %s: %d versions, up to %s\n", $1, NF - 1, $NF }' device-stage/lib/needs.txt
echo "device-stage: staged $(find device-stage/lib -maxdepth 1 -name '*.so*' | wc -l) libraries" \
     "and, used only where the machine's own lack a version: $(ls device-stage/lib/fallback | tr '\n' ' ')"
tar -czf device-stage/lib.tar.gz -C device-stage lib
rm -rf device-stage/lib
tar -cf - -C device-stage build | xz -T1 -6 --lzma2=preset=6,dict=192MiB >device-stage/build.tar.xz
rm -rf device-stage/build

tree_kib=$(git ls-files -z | xargs -0 du -ck 2>/dev/null | tail -n 1 | cut -f1)
stage_kib=$(du -sk device-stage | cut -f1)
total_mib=$(((tree_kib + stage_kib + 1023) / 1024))
echo "device-stage: device-stage/ $((stage_kib / 1024)) MiB + working tree $((tree_kib / 1024)) MiB" \
     "= ${total_mib} MiB to carry (the tool's limit: 64 MiB)"
if ((total_mib > limit_mib)); then
  echo "device-stage: too large to carry (over ${limit_mib} MiB)" >&2
  exit 1
fi
