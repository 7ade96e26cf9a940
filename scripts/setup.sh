#!/usr/bin/env bash
# Installs the Debian packages the suite needs, once. As root it runs apt-get;
# otherwise it prints the exact command and fails, so nothing half-builds.
# Then PyTorch for the twin (scripts/torch_twin.py, tests/test_twin.c) in the virtual
# environment cache/venv (scripts/setup-torch.sh: it reuses a torch python3 already has,
# and downloads only when there is none); SETUP_SKIP_TORCH=1 skips that. A failed install
# warns, saying why: the twin's tests then skip, and CI (.ci/run) fails on that skip.
set -euo pipefail

# header-or-binary  package
needs=(
  "/usr/include/benchmark/benchmark.h libbenchmark-dev"
  "/usr/include/cmocka.h              libcmocka-dev"
  "/usr/include/turbojpeg.h           libturbojpeg0-dev"
  "/usr/include/jpeglib.h             libjpeg62-turbo-dev"
  "/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h libopenblas-dev"
  "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 libjemalloc2"
  "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 libtcmalloc-minimal4"
  "gnuplot                            gnuplot-nox"
  "mpicc                              libopenmpi-dev"
  "mpirun                             openmpi-bin"
  "python3                            python3"
)
# the twin's virtual environment needs pip in python3 (python3-pip) or ensurepip (python3-venv)
venv_ok() { python3 -c 'import venv, pip' >/dev/null 2>&1 || python3 -c 'import venv, ensurepip' >/dev/null 2>&1; }

missing=()
for entry in "${needs[@]}"; do
  read -r what pkg <<<"$entry"
  if [[ $what == /* ]]; then [[ -e $what ]] && continue
  else command -v "$what" >/dev/null 2>&1 && continue; fi
  missing+=("$pkg")
done
if [[ ${SETUP_SKIP_TORCH:-0} != 1 ]] && ! venv_ok; then
  missing+=(python3-venv)
fi

# PyTorch in cache/venv. Its failure only warns here, so that the rest still builds.
install_torch() {
  if ! bash "$(dirname "$0")/setup-torch.sh"; then
    echo "setup: warning: no torch for the twin: its tests will skip (CI: fail)" >&2
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
