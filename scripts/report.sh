#!/usr/bin/env bash
# Writes DIR/report.md: how the results were made (command, GPU, driver, libraries, and a
# warning naming each program whose code changed since the commit that made them), the
# published claims against what was measured here (bench/claims.csv; the verdict rules are
# in scripts/claims.py), what ran and what was skipped and why, the speedups, the charts;
# with DIR/twin/twin.csv (scripts/twin_compare.py), the credibility section first: the core's
# step time and memory against PyTorch's on the same machine; with summary_pytorch.csv
# (scripts/stats.py), each practice's speedup in the core beside PyTorch's, and whether
# they agree (scripts/claims.py pytorch).
# usage: report.sh [RESULTS_DIR]   (default: the newest run under results/, scripts/results-dir.sh)
# Environment: CLAIMS_CSV  the claims file (default bench/claims.csv)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
claims=${CLAIMS_CSV:-$here/../bench/claims.csv}
dir=${1:-$(bash "$here/results-dir.sh" newest results 2>/dev/null)}
dir=${dir%/}
if [[ -z $dir || ! -d $dir ]]; then
  echo "report: no results folder (run make bench first, or pass RESULTS=dir)" >&2
  exit 1
fi
report="$dir/report.md"
ctx() { sed -n "s/^$1=//p" "$dir/context.txt" 2>/dev/null | head -n 1; }

# Whether the code that made this folder (the commit command.txt names, "git: abc1234" or
# "abc1234-dirty") has changed since, in this checkout (work tree included): per program
# with a CSV here, its folder under bench/ and the code every program links (bench/driver,
# kernels, loaders, dist). Prints a warning paragraph, or nothing when nothing changed or
# there is nothing to compare with.
code_changes() {
  local root made commit stem src changed n shared=(bench/driver kernels loaders dist)
  root=$(cd "$here/.." && pwd)
  made=$(sed -n 's/^git: //p' "$dir/command.txt" 2>/dev/null | head -n 1)
  made=${made%% *}
  [[ -n $made && $made != unknown ]] || return 0
  command -v git >/dev/null && git -C "$root" rev-parse --git-dir >/dev/null 2>&1 || return 0
  commit=${made%-dirty}
  if ! git -C "$root" rev-parse -q --verify "$commit^{commit}" >/dev/null 2>&1; then
    echo "**The code that made this folder ($made) is not in this checkout:** whether its programs changed since cannot be told."
    echo
    return 0
  fi
  local rows=() shared_changed shared_text own
  shared_changed=$(git -C "$root" diff --name-only "$commit" -- "${shared[@]}")
  shared_text="none"
  if [[ -n $shared_changed ]]; then
    shared_text="$(printf '%s\n' "$shared_changed" | wc -l) files in $(printf '%s\n' "$shared_changed" |
      sed -E 's#^(bench/driver|[^/]+)/.*#\1#' | sort -u | tr '\n' ' ' | sed 's/ $//; s/ /, /g')"
  fi
  for csv in "$dir"/*.csv; do
    stem=$(basename "$csv" .csv)
    [[ $stem == *.* || $stem == summary* ]] && continue
    src=$(git -C "$root" ls-files "bench/*/bench_$stem.c" | head -n 1)
    [[ -n $src ]] || continue
    own=$(git -C "$root" diff --name-only "$commit" -- "$(dirname "$src")")
    [[ -n $own || -n $shared_changed ]] || continue
    n=$(printf '%s' "$own" | grep -c .)
    changed=$(printf '%s\n' "$own" | head -n 4 | tr '\n' ' ' | sed 's/ $//; s/ /, /g')
    ((n > 4)) && changed="$changed, ..."
    rows+=("| bench_$stem | ${changed:-none} | $shared_text |")
  done
  [[ $made == *-dirty ]] &&
    echo "**Made from uncommitted changes on $commit** (\`$made\`): the exact code cannot be recovered." && echo
  ((${#rows[@]} > 0)) || return 0
  echo "**Warning: the code has changed since this folder was made** (by $made; this checkout: $(git -C "$root" describe --always --dirty 2>/dev/null)). These programs' figures come from code that is no longer what they run; rerun them before quoting:"
  echo
  echo "| program | its own files changed | code every program links (bench/driver, kernels, loaders, dist) |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
}
# What was not quiet on the GPU of this run (docs/gpu-quiet.md), from context.txt's gpu_*
# keys: a list, or one line saying it was quiet. Nothing for a CPU run ("n/a (no GPU)") or
# a context made before the suite recorded these keys.
gpu_quietness() {
  local persistence key v limit default gen gen_max width width_max notes=() unreadable=()
  persistence=$(ctx gpu_persistence_mode)
  [[ -n $persistence && $persistence != n/a* ]] || return 0
  for key in gpu_persistence_mode gpu_clocks_locked gpu_power_limit_w gpu_power_limit_default_w gpu_mig_mode \
    gpu_pcie_gen gpu_pcie_gen_max gpu_pcie_width gpu_pcie_width_max gpu_other_processes; do
    v=$(ctx "$key")
    [[ $v == unknown* ]] && unreadable+=("$key ${v#unknown }")
  done
  [[ $persistence == off ]] &&
    notes+=("persistence mode off: the driver may set the GPU up again between programs (\`nvidia-smi -pm 1\`)")
  [[ $(ctx gpu_clocks_locked) == no* ]] &&
    notes+=("clocks not locked (SM P0 range $(ctx gpu_sm_clock_p0_range_mhz) MHz): the clock follows load, temperature and power (\`nvidia-smi -lgc\`)")
  v=$(ctx gpu_other_processes)
  [[ $v =~ ^[1-9] ]] && notes+=("other processes on the GPU: $v")
  [[ $(ctx gpu_mig_mode) == on* ]] && notes+=("MIG on: the run had a slice of the GPU, not all of it")
  limit=$(ctx gpu_power_limit_w) default=$(ctx gpu_power_limit_default_w)
  [[ $limit =~ ^[0-9.]+$ && $default =~ ^[0-9.]+$ ]] && awk -v a="$limit" -v b="$default" 'BEGIN { exit !(a < b) }' &&
    notes+=("power limit ${limit} W, below the default ${default} W")
  gen=$(ctx gpu_pcie_gen) gen_max=$(ctx gpu_pcie_gen_max) width=$(ctx gpu_pcie_width) width_max=$(ctx gpu_pcie_width_max)
  if [[ $gen$gen_max$width$width_max =~ ^[0-9]+$ ]] && ((gen < gen_max || width < width_max)); then
    notes+=("PCIe link Gen$gen x$width, below its max Gen$gen_max x$width_max (an idle link slows down: it is read when the program starts)")
  fi
  ((${#unreadable[@]} > 0)) && notes+=("not known (NVML could not say): $(printf '%s; ' "${unreadable[@]}" | sed 's/; $//')")
  if ((${#notes[@]} == 0)); then
    echo "**The GPU was quiet:** persistence on, clocks locked, no other process, MIG off, the default power limit, the PCIe link at its max."
  else
    echo "**What was not quiet on the GPU** (how to set each: docs/gpu-quiet.md):"
    echo
    printf -- '- %s\n' "${notes[@]}"
  fi
  echo
}
{
  echo "# Tuning-practice benchmarks: $(basename "$dir")"
  echo
  if [[ -f $dir/command.txt ]]; then
    grep -q '^plan: .*quick-pass' "$dir/command.txt" &&
      echo "**The quick pass** (\`make bench-quick\`, scripts/quick-pass.txt): a few rows of every practice, its headline question; \`make bench\` runs them all." && echo
    echo '```'; cat "$dir/command.txt"; echo '```'; echo
    code_changes
  fi
  echo "## Machine"
  echo
  echo "| key | value |"
  echo "|---|---|"
  if [[ -f $dir/context.txt ]]; then
    sed 's/|/\\|/g; s/^\([^=]*\)=\(.*\)$/| \1 | \2 |/' "$dir/context.txt"
  fi
  echo
  if [[ -n $(ctx no_gpu_reason) ]]; then
    echo "**No GPU here: $(ctx no_gpu_reason).** GPU benchmarks were skipped; the CPU ones ran."
    echo
  fi
  gpu_quietness

  if [[ -f $dir/twin/twin.csv ]]; then
    echo "## Credibility: the core against PyTorch"
    echo
    if command -v python3 >/dev/null; then
      python3 "$here/twin_compare.py" --render "$dir/twin" || echo "(twin.csv could not be read: see scripts/twin_compare.py's message)"
    else
      echo "(python3 is not installed here: see twin.csv)"
    fi
    echo
  fi

  echo "## Published claims, checked on this machine"
  echo
  if ! command -v python3 >/dev/null; then
    echo "(python3 is not installed here: no claims table; \`make charts\` redraws this report)"
  elif ! python3 "$here/claims.py" table "$dir" "$claims"; then
    echo "(the claims table could not be made: see the message of scripts/claims.py)"
    table_failed=1
  else
    echo
    echo "Verdicts: the measured speedup (baseline time / tuned time) as \"2.00x [1.80-2.20], ±10%\":"
    echo "its 95% interval and that interval's half-width relative to it. Against the claim:"
    echo "\"no effect here\" only when the interval lies within the equivalence margin (stated"
    echo "under the table); \"inconclusive here (±N%)\" when it is neither significant nor that"
    echo "narrow (the data cannot tell: measure more); \"reversed here\" when it lies on the other"
    echo "side of 1.00x; else against the claimed range where the source gives one (overlapping:"
    echo "\"holds\"; below: \"smaller here\"; above: \"larger here\"). Each claim is checked on the"
    echo "variant it names (at the one size it names, where it names one). Without an interval"
    echo "(1 repetition), or with too few repetitions for a test, the verdict is \"not enough"
    echo "data\"; a variant whose runs missed their target \"did not reach\". Accuracy claims"
    echo "compare final held-out accuracy at equal epochs (tuned - baseline, 95% interval) with a"
    echo "tolerated loss (the claim's, else the margin times the baseline's accuracy)."
    echo "Reference figures come from elsewhere and get no verdict here."
  fi
  echo

  echo "## What ran"
  echo
  if [[ -f $dir/suite-status.tsv ]]; then
    # a program cut at its deadline (<program>.partial: rows done, rows planned) is partial
    if ! { command -v python3 >/dev/null && python3 "$here/claims.py" status "$dir"; }; then
      echo "| program | status | ok | skipped | errors | seconds | reason |"
      echo "|---|---|---|---|---|---|---|"
      tail -n +2 "$dir/suite-status.tsv" | sed 's/|/\\|/g; s/\t/ | /g; s/^/| /; s/$/ |/'
    fi
  else
    echo "(no suite-status.tsv: this folder was not written by make bench)"
  fi
  echo

  echo "## Speedups (baseline time / tuned time)"
  echo
  if command -v python3 >/dev/null; then
    python3 "$here/claims.py" speedups "$dir" || table_failed=1
  elif [[ -f $dir/summary_by_variant.csv ]] && (($(wc -l <"$dir/summary_by_variant.csv") > 1)); then
    echo "| practice | tuned variant | points | speedup |"
    echo "|---|---|---|---|"
    awk -F, 'NR > 1 { printf "| %s | %s | %s | %.2fx |\n", $1, $2, $5, $6 }' "$dir/summary_by_variant.csv"
  else
    echo "No speedups: no practice had both a measured baseline and a measured tuned variant."
  fi
  echo

  echo "## PyTorch side by side"
  echo
  if command -v python3 >/dev/null; then
    python3 "$here/claims.py" pytorch "$dir" || table_failed=1
  else
    echo "(python3 is not installed here: see summary_pytorch.csv)"
  fi
  echo

  echo "## Charts"
  echo
  shopt -s nullglob
  # one entry per chart, whichever formats were drawn (CHART_FORMATS: SVG by default)
  names=()
  for f in "$dir"/charts/*.svg "$dir"/charts/*.png; do
    n=$(basename "${f%.*}")
    [[ " ${names[*]} " == *" $n "* ]] || names+=("$n")
  done
  # the headline chart first
  for i in "${!names[@]}"; do
    [[ ${names[$i]} == summary_speedup ]] && names=("summary_speedup" "${names[@]:0:$i}" "${names[@]:$((i + 1))}") && break
  done
  if ((${#names[@]} == 0)); then
    echo "No charts: nothing was measured that has a chart."
  fi
  for name in "${names[@]}"; do
    echo "### $name"
    echo
    if [[ -f $dir/charts/$name.svg && -f $dir/charts/$name.png ]]; then
      echo "![$name](charts/$name.svg) ([PNG](charts/$name.png))"
    elif [[ -f $dir/charts/$name.svg ]]; then
      echo "![$name](charts/$name.svg)"
    else
      echo "![$name](charts/$name.png)"
    fi
    echo
  done

  echo "## Files"
  echo
  echo "- \`<practice>.json\`: Google Benchmark JSON (works with its tools/compare.py)"
  echo "- \`<practice>.csv\`: tidy CSV, one row per benchmark instance, context on every row"
  echo "- \`<practice>.curves.csv.gz\`: curves against training steps (gzipped CSV)"
  echo "- \`summary.csv\`, \`summary_by_variant.csv\`: speedups; \`logs/\`: console output (gzipped)"
  if [[ -f $dir/summary_pytorch.csv ]]; then
    echo "- \`pytorch.csv\`, \`summary_pytorch.csv\`: the PyTorch side's rows; the core's speedups beside PyTorch's, with their agreement"
  fi
} >"$report" || { echo "report: cannot write $report" >&2; exit 1; }
echo "report: $report"
exit ${table_failed:-0}
