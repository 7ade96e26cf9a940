#!/usr/bin/env bash
# Installs the Debian packages the suite needs, once. As root it runs apt-get;
# otherwise it prints the exact command and fails, so nothing half-builds.
set -euo pipefail

# header-or-binary  package
needs=(
  "/usr/include/benchmark/benchmark.h libbenchmark-dev"
  "/usr/include/cmocka.h              libcmocka-dev"
  "/usr/include/turbojpeg.h           libturbojpeg0-dev"
  "/usr/include/jpeglib.h             libjpeg62-turbo-dev"
  "/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h libopenblas-dev"
  "gnuplot                            gnuplot-nox"
  "mpicc                              libopenmpi-dev"
  "mpirun                             openmpi-bin"
  "python3                            python3"
)

missing=()
for entry in "${needs[@]}"; do
  read -r what pkg <<<"$entry"
  if [[ $what == /* ]]; then [[ -e $what ]] && continue
  else command -v "$what" >/dev/null 2>&1 && continue; fi
  missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all dependencies present"
  exit 0
fi

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "setup: missing Debian packages: ${missing[*]}" >&2
  echo "setup: run as root:  $cmd" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
