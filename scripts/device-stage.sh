#!/usr/bin/env bash
# Prepares the GPU check on this (GPU-less) machine, in device-stage/ (git ignores it):
#   device-stage/build.tar.xz  the programs and tests, built for sm_90 (in build-device/),
#                          debug info stripped, run path $ORIGIN/../lib and $ORIGIN/../../lib;
#                          packed with xz's large window, which stores the device code every
#                          program links (libkernels) once instead of ~40 times (145 MiB ->
#                          a few MiB); device-check.sh unpacks it into device-stage/build/
#   device-stage/lib.tar.gz  the shared libraries they need that the GPU machine lacks
#                          (Google Benchmark, TurboJPEG, cmocka, OpenBLAS, OpenMP, libstdc++
#                          ...; never CUDA, cuBLAS, cuDNN or NCCL, which
#                          scripts/with-gpu-libs.sh finds there), unpacked there on first use
# Then the device tool: carry ["device-stage"], command "bash scripts/device-check.sh 480" (timeout ~540 s).
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
for prog in "${progs[@]}"; do ldd "$prog"; done | awk '/=> \// { print $3 }' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux[^/]*)\.so' |
  grep -Ev '/lib(cuda|cudart|cublas|cublasLt|cudnn[^/]*|nccl|nvidia-ml|nvrtc)\.so' |
  while read -r lib; do cp -L "$lib" device-stage/lib/; done
echo "device-stage: staged $(ls device-stage/lib | wc -l) libraries: $(ls device-stage/lib | tr '\n' ' ')"
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
