#!/usr/bin/env bash
# Installs the Debian packages the suite needs, once. As root it runs apt-get;
# otherwise it prints the exact command and fails, so nothing half-builds.
# Then PyTorch for the twin (scripts/torch_twin.py, tests/test_twin.c): `python3 -m pip
# install torch` when python3 cannot import it (about a minute); SETUP_SKIP_TORCH=1 skips
# that. A failed install only warns: the twin's tests then skip, saying why.
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

# PyTorch from PyPI (the wheel is large; CPU use is all the tests need).
install_torch() {
  if [[ ${SETUP_SKIP_TORCH:-0} == 1 ]]; then
    echo "setup: SETUP_SKIP_TORCH=1: not installing torch (the twin's tests will skip)"
  elif python3 -c 'import torch' >/dev/null 2>&1; then
    echo "setup: torch present ($(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null))"
  else
    echo "setup: installing torch for the PyTorch twin (python3 -m pip install torch)"
    if ! python3 -m pip install --quiet torch; then
      echo "setup: warning: could not install torch; the twin's tests will skip" \
           "(install it by hand: python3 -m pip install torch)" >&2
    fi
  fi
  return 0
}

if ((${#missing[@]} == 0)); then
  echo "setup: all dependencies present"
  install_torch
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
install_torch
