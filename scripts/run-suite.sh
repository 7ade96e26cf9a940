#!/usr/bin/env bash
# `make bench`: runs every practice program in BUILD with JSON and tidy-CSV output
# into results/<gpu>_<driver>_<yyyymmdd-hhmmss>-<4 hex>/ (cpu_<host>_... without a GPU;
# scripts/results-dir.sh makes it, never one another run has), keeps going past a program
# that fails, then writes the speedup summary, the charts and report.md, and ends with a
# table of what ran, what was skipped and why.
#
# Environment:
#   BENCH_ARGS     extra flags for every program (e.g. --benchmark_min_time=0.05)
#   BENCH_ARGS_<name>  extra flags for one program, after BENCH_ARGS (e.g.
#                  BENCH_ARGS_batch_size='--preset=tiny' for build/bench_batch_size)
#   BENCH_FILTER   run only programs whose name matches this regex (e.g. pin_memory)
#   BENCH_REPETITIONS  the least repetitions of every benchmark (default 6; make bench passes
#                  it): a row's baseline and tuned repetitions run interleaved at random, in
#                  blocks, so that drift hits both alike and they pair up; each repetition's
#                  value goes to <name>.reps.csv and into the statistics
#   BENCH_PRECISION    add repetitions to a row until the 95% interval of its speedup (of its
#                  median, for a row without one) is within +-this fraction (default auto:
#                  0.02 on a GPU, 0.05 on a CPU; 0: exactly BENCH_REPETITIONS), at most
#                  BENCH_MAX_REPETITIONS (default 60) and within the program's share of
#                  BENCH_BUDGET (without one: 3x the time of a row's first repetitions)
#   BENCH_TIMEOUT  seconds one program may run before it is stopped (default 1800; 0: no limit)
#   RESULTS_DIR    write here instead of a new folder results/<slug>_<date>-<suffix>
#   RESULTS_ROOT   make that new folder here instead of in results/
#   BENCH_NO_CHARTS=1  skip the charts (a machine without gnuplot; `make charts` later)
#   BENCH_DEADLINE     a time (seconds since the epoch) by which everything, summary and
#                      report included, must be done: each program gets at most 5/4 of its
#                      share of what is left (and at most BENCH_TIMEOUT); one that cannot
#                      start in time is "not run"
#   BENCH_AFTER_PROGRAM  a shell command run after each program (e.g. to archive what
#                      has finished so far; scripts/device-check.sh uses it)
#   BENCH_COMMAND      the command recorded in command.txt (default: make bench ...)
#   BENCH_BUDGET       seconds the whole run may take (summary and report included): sets
#                      BENCH_DEADLINE to now + BENCH_BUDGET; each program's share is by
#                      the number of its practices that take time here (docs/statistics.md,
#                      "Under a budget"), or its BENCH_PLAN share
#   BENCH_VERBOSE=1    the full Google Benchmark console of every program on the terminal
#                      (it always goes to logs/<name>.log, gzipped when the program
#                      ends: logs/<name>.log.gz); without it the terminal gets the
#                      time plan, one line per program (updated in place with its progress
#                      on a terminal) and the plan against what ran
#   BENCH_PROGRESS     1: the in-place progress line even when stdout is no terminal;
#                      0: never (default: only on a terminal)
#   BENCH_PLAN_ONLY=1  print the time plan and stop (no results folder)
#   BENCH_TWIN=0       leave out the PyTorch side (the program `pytorch`, scripts/twin/bench.py:
#                      every practice measured in PyTorch too, docs/pytorch-side.md), which
#                      otherwise runs after the core's programs with the same flags
#   BENCH_PLAN         a plan file (scripts/quick-pass.txt: its format is described there):
#                      each program's share of the time (with BENCH_DEADLINE) and arguments,
#                      the repetitions and a minimum time; the variables above win over it
#
# A program stopped at its share (SIGINT: the harness writes what it finished and a
# <practice>.partial file, "rows_done rows_planned") is `partial`, not failed: a cut
# depends on the host's speed, not on the program. One cut before its first row leaves
# no empty CSV behind and is `not run`. Each program's planned share, the benchmarks it
# lists, its rows and the time it took go to suite-plan.tsv and to the output.
#
# The time plan: before running, each program's rows (--benchmark_list_tests with its
# filter), repetitions and estimated time: what the newest earlier run on the same hardware
# (beside the new folder; the same CPU model, cores and threads, GPU name, count and maximum
# SM clock in its context.txt, whatever its host name or slug) made the same way (the same
# BENCH_PLAN, BENCH_ARGS and BENCH_ARGS_<name>) took for the program, scaled by rows and
# repetitions when they differ; a program no such run has is estimated from its rows'
# minimum times (the min_time in each benchmark's name, else 0.5 s).
#
# Stopped by SIGTERM, SIGINT or SIGHUP (timeout(1) and CI systems signal make's whole
# process group, as scancel and container runtimes do; Ctrl-C; a closed terminal): each
# program runs under its own timeout(1), in a process group of its own that such a signal
# does not reach, so run-suite sends it on to the running program's group and gives the
# program 5 seconds (stop_grace) to write what it finished (the harness does on SIGINT,
# SIGTERM and SIGHUP) before SIGKILL; it is recorded as partial (not run without a row),
# the programs after it as not run, the summary and report of what finished are written
# (no charts: `make charts` draws them) and run-suite exits 128 + the signal. Nothing it
# started runs on.
set -uo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
timeout_s=${BENCH_TIMEOUT:-1800}

# --- Stopping (see above) -------------------------------------------------------------
stop_signal="" child="" stop_grace=5
on_signal() {
  # one is enough: timeout(1) signals make, make signals us, and timeout signals the group
  [[ -n $stop_signal ]] && return 0
  stop_signal=$1
  [[ -n $child ]] && kill -s "$1" -- "-$child" "$child" 2>/dev/null
  return 0
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP
# Waits for the background command $child (a timeout(1), which leads a process group of
# its own) and sets rc to its exit status. A stop signal interrupts the wait: the command
# has been told (on_signal) and gets stop_grace seconds before its whole group is killed.
wait_child() {
  local r r2 waited=0
  # a signal that came between the start and `child=$!` found no one to tell
  [[ -n $stop_signal ]] && kill -s "$stop_signal" -- "-$child" "$child" 2>/dev/null
  while :; do
    wait "$child"
    r=$?
    if ! kill -0 "$child" 2>/dev/null; then
      wait "$child" 2>/dev/null # its status, when the wait above was cut short as it ended
      r2=$?
      ((r2 != 127)) && r=$r2
      break
    fi
    [[ -n $stop_signal ]] || continue
    while kill -0 "$child" 2>/dev/null && ((waited < stop_grace * 10)); do
      sleep 0.1
      waited=$((waited + 1))
    done
    kill -s KILL -- "-$child" "$child" 2>/dev/null
  done
  rc=$r child=""
}
stop_status() { echo $((128 + $(kill -l "$stop_signal"))); }

# The plan: shares (weights, percent) and defaults for what the caller did not set.
declare -A plan_share=()
if [[ -n ${BENCH_PLAN:-} ]]; then
  if [[ ! -r $BENCH_PLAN ]]; then
    echo "run-suite: BENCH_PLAN='$BENCH_PLAN' cannot be read" >&2
    exit 1
  fi
  while read -r pname pshare pargs; do
    [[ -z $pname || $pname == \#* ]] && continue
    case $pname in
      repetitions) : "${BENCH_REPETITIONS:=$pshare}" ;;
      precision) : "${BENCH_PRECISION:=$pshare}" ;;
      min_time) : "${BENCH_ARGS:=--benchmark_min_time=$pshare}" ;;
      *)
        if [[ ! $pshare =~ ^[0-9]+$ ]]; then
          echo "run-suite: $BENCH_PLAN: share '$pshare' of $pname is not a whole percentage" >&2
          exit 1
        fi
        plan_share[$pname]=$pshare
        var=BENCH_ARGS_$pname
        [[ -n ${!var+set} ]] || export "$var=$pargs" ;;
    esac
  done <"$BENCH_PLAN"
fi
read -r -a extra_args <<<"${BENCH_ARGS:-}"
repetitions=${BENCH_REPETITIONS:-6}
if [[ ! $repetitions =~ ^[0-9]+$ ]] || ((repetitions < 1)); then
  echo "run-suite: BENCH_REPETITIONS='$repetitions' is not a whole number >= 1" >&2
  exit 1
fi
precision=${BENCH_PRECISION:-auto}
if [[ $precision != auto && ! $precision =~ ^(0|0?\.[0-9]+)$ ]]; then
  echo "run-suite: BENCH_PRECISION='$precision' is not auto or a fraction below 1 (0.05: +-5%)" >&2
  exit 1
fi
max_repetitions=${BENCH_MAX_REPETITIONS:-60}
if [[ ! $max_repetitions =~ ^[0-9]+$ ]] || ((max_repetitions < repetitions)); then
  echo "run-suite: BENCH_MAX_REPETITIONS='$max_repetitions' is not a whole number >= BENCH_REPETITIONS ($repetitions)" >&2
  exit 1
fi
rep_args=(--benchmark_repetitions="$repetitions" --harness_precision="$precision"
  --harness_max_repetitions="$max_repetitions")
if [[ ! $timeout_s =~ ^[0-9]+$ ]]; then # 0: no limit, as for timeout(1)
  echo "run-suite: BENCH_TIMEOUT='$timeout_s' is not a whole number of seconds" >&2
  exit 1
fi
budget=${BENCH_BUDGET:-}
if [[ -n $budget ]]; then
  if [[ ! $budget =~ ^[0-9]+$ ]] || ((budget < 10)); then
    echo "run-suite: BENCH_BUDGET='$budget' is not a whole number of seconds >= 10" >&2
    exit 1
  fi
  : "${BENCH_DEADLINE:=$(($(date +%s) + budget))}"
fi
deadline=${BENCH_DEADLINE:-}
if [[ -n $deadline && ! $deadline =~ ^[0-9]+$ ]]; then
  echo "run-suite: BENCH_DEADLINE='$deadline' is not a time in seconds since the epoch" >&2
  exit 1
fi
finish_reserve=5 # seconds kept for the summary and the report after the last program

# The programs first: nothing to run writes no empty results folder.
shopt -s nullglob
programs=()
for p in "$build"/bench_*; do
  [[ -x $p && ! -d $p ]] || continue
  [[ -z ${BENCH_FILTER:-} || $(basename "$p") =~ $BENCH_FILTER ]] && programs+=("$p")
done
# The PyTorch side (docs/pytorch-side.md): the program `pytorch`, scripts/twin/bench.py with
# the core's flags, after the core's programs. It runs beside a full build of the suite (one
# with steptime, the core the twin is checked against; the tests' fake builds have none),
# unless BENCH_TWIN=0. Its Python: $PYTHON, else cache/venv/bin/python (scripts/setup.sh
# makes it, with torch), else python3; without torch its rows are skips naming why.
twin_dir="" twin_note=""
if [[ -x $build/steptime && ( -z ${BENCH_FILTER:-} || bench_pytorch =~ $BENCH_FILTER ) ]]; then
  if [[ ${BENCH_TWIN:-1} == 0 ]]; then
    twin_note="pytorch: not run (BENCH_TWIN=0)"
  else
    twin_py=${PYTHON:-$here/../cache/venv/bin/python}
    [[ -x $twin_py ]] || twin_py=$(command -v python3 || echo python3)
    twin_dir=$(mktemp -d) || exit 1
    trap 'rm -rf "$twin_dir"' EXIT # until the plan's trap below, which removes it too
    printf '#!/usr/bin/env bash\nexec %q %q --context_program=%q "$@"\n' "$twin_py" "$here/twin/bench.py" \
      "$build/context" >"$twin_dir/bench_pytorch"
    chmod +x "$twin_dir/bench_pytorch"
    programs+=("$twin_dir/bench_pytorch")
    if twin_torch=$(timeout 120 "$twin_py" -c 'import torch; print(torch.__version__)' 2>&1); then
      twin_note="pytorch: the PyTorch side (BENCH_TWIN=0 turns it off): torch ${twin_torch##*$'\n'} in $twin_py"
    else
      twin_note="pytorch: no torch in $twin_py (${twin_torch##*$'\n'}): its rows are skips (scripts/setup.sh makes cache/venv with torch; BENCH_TWIN=0 turns it off)"
    fi
  fi
fi
if ((${#programs[@]} == 0)); then
  echo "run-suite: no practice programs in $build${BENCH_FILTER:+ match BENCH_FILTER='$BENCH_FILTER'} (build them with make)" >&2
  exit 1
fi

slug=$("$build/context" --slug) && context=$("$build/context") ||
  { echo "run-suite: $build/context failed" >&2; exit 1; }
# The new folder is made once the plan is done (none for BENCH_PLAN_ONLY=1); earlier runs
# are looked for where it will be.
results_root=${RESULTS_ROOT:-results}
[[ -n ${RESULTS_DIR:-} ]] && results_root=$(dirname "$RESULTS_DIR")

verbose=${BENCH_VERBOSE:-0}
[[ $verbose == 1 ]] || verbose=0
progress=${BENCH_PROGRESS:-}
if [[ -z $progress ]]; then [[ -t 1 ]] && progress=1 || progress=0; fi
((verbose)) && progress=0
nprog=${#programs[@]}

# "2 min 6 s", "44 s", "1 h 3 min"
duration() {
  local s=$1
  if ((s >= 3600)); then echo "$((s / 3600)) h $((s % 3600 / 60)) min"
  elif ((s >= 60)); then echo "$((s / 60)) min $((s % 60)) s"
  else echo "$s s"; fi
}

echo "run-suite: $nprog practice programs"

# --- The time plan -------------------------------------------------------------------
# What decides speed, from a context (context.txt's lines on stdin): the CPU model, its
# cores and the CPU backend's threads, the GPU's name, count and maximum SM clock. Not the
# host name (the slug): two machines called "vm" may be an Intel and an AMD one.
speed_key() {
  awk -F= '$1 ~ /^(host_cpu|host_cores|cpu_threads|gpu_name|gpu_count|gpu_sm_clock_max_mhz)$/' | sort
}
this_key=$(speed_key <<<"$context")
# Earlier runs on this hardware beside the new folder, newest first; and how many others.
previous=() other_hardware=0
while IFS= read -r d; do
  [[ -s $d/suite-status.tsv ]] || continue
  [[ -n ${RESULTS_DIR:-} && $(realpath -m "$d") == "$(realpath -m "$RESULTS_DIR")" ]] && continue
  if [[ $(speed_key <"$d/context.txt") == "$this_key" ]]; then previous+=("$d")
  else other_hardware=$((other_hardware + 1)); fi
done < <(bash "$here/results-dir.sh" runs "$results_root" 2>/dev/null)
# What an earlier folder says of a program: "seconds rows repetitions", or nothing when
# it did not run there (not run) or ran it otherwise: another plan (the
# quick pass against a full run), other BENCH_ARGS or other arguments of its own (a quick
# pass's 0.05 s rows say nothing of a full run's 0.5 s ones, whatever the row counts).
# Nor a run made before each repetition ran its whole minimum time (the precision rule,
# statistics.md): its command.txt's repetitions line lacks "at least", and its repetitions
# were a fraction of one now.
previous_of() { # folder name
  local reps cmd=$1/command.txt var=BENCH_ARGS_$2 plan this_plan=${BENCH_PLAN:-}
  grep -q '^repetitions: .*at least' "$cmd" 2>/dev/null || return 0
  plan=$(sed -n 's/^plan: //p' "$cmd" 2>/dev/null)
  [[ ${plan##*/} == "${this_plan##*/}" ]] || return 0
  [[ $(sed -n 's/^args: //p' "$cmd" 2>/dev/null) == "${BENCH_ARGS:-}" ]] || return 0
  [[ $(sed -n "s/^$var: //p" "$cmd" 2>/dev/null) == "${!var:-}" ]] || return 0
  reps=$(sed -n 's/^repetitions: \([0-9]*\).*/\1/p' "$cmd" 2>/dev/null)
  # A program cut at its share (partial: "cut at ...: DONE of PLANNED rows", repetitions of
  # its instances) needed at least its time scaled to the whole plan: a lower bound, and
  # under a budget most programs are cut, so a full run's history would rarely exist.
  awk -F'\t' -v n="$2" -v reps="${reps:-5}" '
    NR > 1 && $1 == n && $2 == "partial" && match($7, /[0-9]+ of [0-9]+ rows/) {
      split(substr($7, RSTART, RLENGTH), w, " ")
      if (w[1] > 0 && w[3] > 0) {
        f = w[3] > w[1] ? w[3] / w[1] : 1
        printf "%d %d %d\n", $6 * f + 0.5, w[3] / reps + 0.5, reps
      }
      exit
    }
    NR > 1 && $1 == n && $2 != "not run" && $2 != "partial" { print $6, $3 + $4 + $5, reps; exit }' \
    "$1/suite-status.tsv"
}
# From the rows' minimum times: each row runs its repetitions of its min_time each
# (statistics.md), plus ~0.2 s of set-up; a row without a min_time in its name gets Google
# Benchmark's 0.5 s; --benchmark_min_time among the arguments wins. A row that will skip
# here (a GPU row on a machine without a usable GPU) is named min_time:0.000 by its
# program (harness.h's gpu_only; the PyTorch side's CUDA rows likewise): 0.01 s. Repetitions the
# precision target adds are not in it: under BENCH_BUDGET they come from each program's
# share, without one they cost up to 2x more (each row group at most 3x its first block).
estimate_from_min_times() { # listing-file program-args...
  local list=$1 forced=""; shift
  local a
  for a in "$@"; do [[ $a == --benchmark_min_time=* ]] && forced=${a#*=}; done
  forced=${forced%s}
  awk -v reps="$repetitions" -v forced="$forced" '
    /\/min_time:0\.000\// { s += 0.01; next }
    /\// { t = 0.5
           if (match($0, /min_time:[0-9.]+/)) t = substr($0, RSTART + 9, RLENGTH - 9) + 0
           if (forced != "") t = forced + 0
           s += reps * t + 0.2 }
    END { printf "%d\n", s + 0.5 }' "$list"
}

plan_tmp=$(mktemp -d) || exit 1
monitor=""
trap 'rm -rf "$plan_tmp" ${twin_dir:+"$twin_dir"}; [[ -n $monitor ]] && kill "$monitor" 2>/dev/null' EXIT
# Stopped before any program ran: nothing to keep (no results folder yet).
stopped_in_plan() {
  echo "run-suite: stopped by SIG$stop_signal while planning: no program ran, no results folder" >&2
  exit "$(stop_status)"
}
listed_of=() estimate_of=() source_of=() practices_of=()
plan_total=0 from_previous=""
for prog in "${programs[@]}"; do
  name=$(basename "$prog"); name=${name#bench_}
  prog_args_var=BENCH_ARGS_$name
  read -r -a prog_args <<<"${!prog_args_var:-}"
  listing="$plan_tmp/$name.list"
  timeout 30 "$prog" --benchmark_list_tests "${extra_args[@]}" "${prog_args[@]}" >"$listing.all" 2>/dev/null &
  child=$!
  wait_child
  [[ -n $stop_signal ]] && stopped_in_plan
  grep / "$listing.all" >"$listing"
  listed=$(grep -c / "$listing")
  # the practices that take time here (a row named min_time:0.000 skips at once)
  practices_of+=("$(grep -v 'min_time:0\.000/' "$listing" | awk -F/ '{ print $1 }' | sort -u | grep -c .)")
  est="" src=""
  # An earlier run with the same rows and repetitions first, else the newest with the
  # program, scaled by rows and repetitions.
  for pass in same any; do
    for d in "${previous[@]}"; do
      read -r psecs prows preps < <(previous_of "$d" "$name")
      [[ -n ${psecs:-} ]] || continue
      if [[ $pass == same ]]; then
        ((prows == listed && preps == repetitions)) || continue
        est=$psecs
      else
        ((prows > 0 && preps > 0)) || continue
        est=$(((psecs * listed * repetitions + prows * preps / 2) / (prows * preps)))
      fi
      src="$(basename "$d")"; from_previous=1
      break 2
    done
  done
  if [[ -z $est ]]; then
    est=$(estimate_from_min_times "$listing" "${extra_args[@]}" "${prog_args[@]}")
    src="min times"
  fi
  listed_of+=("$listed") estimate_of+=("$est") source_of+=("$src")
  plan_total=$((plan_total + est))
done
echo
if [[ -z $from_previous ]] && ((other_hardware > 0)); then
  echo "No earlier run on this hardware ($(awk 'NR > 1 { printf ", " } { printf "%s", $0 }' <<<"$this_key")): estimates from the rows' minimum times ($other_hardware earlier runs in $results_root were on other hardware)"
fi
echo "Time plan ($repetitions repetitions each; estimates from ${from_previous:+the newest earlier run on this hardware, else }the rows' minimum times):"
{
  printf 'program\trows\trepetitions\testimate\tfrom\n'
  for ((k = 0; k < nprog; k++)); do
    name=$(basename "${programs[k]}"); name=${name#bench_}
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "${listed_of[k]}" "$repetitions" "$(duration "${estimate_of[k]}")" "${source_of[k]}"
  done
  printf 'total\t\t\t%s\t%s\n' "$(duration "$plan_total")" "+ summary, charts, report"
} | column -t -s $'\t' | sed 's/^/  /'
[[ -n $twin_note ]] && echo "$twin_note"
if [[ -n $budget ]]; then
  if ((plan_total + finish_reserve > budget)); then
    echo "BENCH_BUDGET=$budget: the plan needs ~$(duration "$plan_total"): programs are cut at their shares (kept as partial)"
  else
    echo "BENCH_BUDGET=$budget: the plan fits"
  fi
fi

if [[ ${BENCH_PLAN_ONLY:-} == 1 ]]; then exit 0; fi
[[ -n $stop_signal ]] && stopped_in_plan

if [[ -n ${RESULTS_DIR:-} ]]; then
  out=$RESULTS_DIR
  mkdir -p "$out" || exit 1
else
  out=$(bash "$here/results-dir.sh" create "$results_root" "$slug") || exit 1
fi
echo "run-suite: writing $out"
mkdir -p "$out/logs" || exit 1
status="$out/suite-status.tsv"
printf 'program\tstatus\tok\tskipped\terrors\tseconds\treason\n' >"$status"
plan_out="$out/suite-plan.tsv"
printf 'program\tshare_percent\tshare_s\tlimit_s\tbenchmarks\trepetitions\trows\tseconds\testimate_s\n' >"$plan_out"
printf '%s\n' "$context" >"$out/context.txt"
{
  echo "command: ${BENCH_COMMAND:-make bench${BENCH_ARGS:+ BENCH_ARGS=\"$BENCH_ARGS\"}${BENCH_FILTER:+ BENCH_FILTER=\"$BENCH_FILTER\"}}"
  echo "repetitions: $repetitions (at least; precision $precision, at most $max_repetitions)"
  [[ -n ${BENCH_PLAN:-} ]] && echo "plan: $BENCH_PLAN"
  [[ -n ${BENCH_ARGS:-} ]] && echo "args: $BENCH_ARGS"
  [[ -n $budget ]] && echo "budget: $budget s (BENCH_BUDGET)"
  for v in $(compgen -v BENCH_ARGS_); do echo "$v: ${!v}"; done
  echo "git: $(git -C "$here/.." describe --always --dirty 2>/dev/null || echo unknown)"
} >"$out/command.txt"
grep -q '^no_gpu_reason=' "$out/context.txt" &&
  echo "run-suite: $(sed -n 's/^no_gpu_reason=//p' "$out/context.txt"): GPU benchmarks will be skipped"

# Each program's weight: its plan share, else the plan's mean share; without a plan, the
# number of its practices that take time here (docs/statistics.md, "Under a budget"): a
# budget is shared equally by the practices, whatever their rows cost, and each program
# shares its part equally over its practices, each spending it precision first. A program
# whose rows all skip here weighs nothing (it takes no time).
weights=() weight_total=0
for ((k = 0; k < nprog; k++)); do
  name=$(basename "${programs[k]}"); name=${name#bench_}
  w=${plan_share[$name]:-}
  if [[ -z $w ]]; then
    w=1
    if ((${#plan_share[@]})); then
      w=0; for v in "${plan_share[@]}"; do w=$((w + v)); done
      w=$((w / ${#plan_share[@]}))
      ((w > 0)) || w=1
    elif [[ -n $deadline ]]; then
      w=${practices_of[k]}
    fi
  fi
  weights+=("$w"); weight_total=$((weight_total + w))
done
((weight_total > 0)) || weight_total=1

# The rows of a tidy CSV by status: "ok skipped errors partial first-reason".
csv_counts() {
  awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { n[$col["status"]]++; if ($col["status"] != "ok" && why == "") why = $col["reason"] }
    END { printf "%d %d %d %d %s\n", n["ok"], n["skipped"], n["error"], n["partial"], why }' "$1"
}

# The in-place progress line of a running program (on a terminal): repetitions finished
# (<name>.reps.csv, written as each finishes) plus skipped and failed ones (the log),
# against rows x repetitions.
progress_loop() { # index name listed estimate
  local idx=$1 pname=$2 plisted=$3 pest=$4 t0=$SECONDS units done_rows el left total
  total=$((plisted * repetitions))
  while sleep 1 && kill -0 $$ 2>/dev/null; do # not past run-suite itself (Ctrl-C, a kill)
    units=0
    [[ -f $out/$pname.reps.csv ]] && units=$(($(wc -l <"$out/$pname.reps.csv") - 1))
    ((units < 0)) && units=0
    # a skipped row is printed once (for all its repetitions), a failed one per repetition
    units=$((units + repetitions * $(grep -c -E '  SKIPPED' "$out/logs/$pname.log" 2>/dev/null) +
      $(grep -c -E '  ERROR OCCURRED' "$out/logs/$pname.log" 2>/dev/null)))
    ((units > total)) && units=$total
    done_rows=$((units / repetitions))
    el=$((SECONDS - t0))
    if ((units > 0)); then left=$((el * (total - units) / units))
    else left=$((pest > el ? pest - el : 0)); fi
    printf '\r\033[K[%d/%d] %s: %d/%d rows x %d repetitions, %s elapsed, ~%s left' \
      "$idx" "$nprog" "$pname" "$done_rows" "$plisted" "$repetitions" "$(duration "$el")" "$(duration "$left")"
  done
}

any_failed=0
i=0
weight_left=$weight_total
stdbuf_cmd=()
command -v stdbuf >/dev/null 2>&1 && stdbuf_cmd=(stdbuf -oL -eL) # the log as it happens
for prog in "${programs[@]}"; do
  i=$((i + 1))
  name=$(basename "$prog"); name=${name#bench_}
  weight=${weights[i - 1]} listed=${listed_of[i - 1]} estimate=${estimate_of[i - 1]}
  prog_args_var=BENCH_ARGS_$name
  read -r -a prog_args <<<"${!prog_args_var:-}"
  if [[ -n $stop_signal ]]; then
    echo "[$i/$nprog] $name not run: run-suite was stopped (SIG$stop_signal)"
    printf '%s\t%s\t%d\t%d\t%d\t%d\t%s\n' "$name" "not run" 0 0 0 0 "run-suite was stopped (SIG$stop_signal)" >>"$status"
    printf '%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$name" $((100 * weight / weight_total)) 0 0 "$listed" \
      "$repetitions" 0 0 "$estimate" >>"$plan_out"
    continue
  fi
  if ((verbose)); then
    echo
    echo "[$i/$nprog] $name  (log: $out/logs/$name.log)"
  fi
  limit=$timeout_s limited_by="BENCH_TIMEOUT" kill_after=30 share=""
  if [[ -n $deadline ]]; then
    kill_after=3 # SIGKILL soon after SIGINT: the deadline is for everything
    remaining=$((deadline - $(date +%s) - finish_reserve - kill_after))
    left=$((nprog - i + 1))
    if ((remaining < 5)); then
      echo "[$i/$nprog] $name not run: no time left before BENCH_DEADLINE"
      printf '%s\t%s\t%d\t%d\t%d\t%d\t%s\n' "$name" "not run" 0 0 0 0 \
        "no time left before the deadline (BENCH_DEADLINE)" >>"$status"
      printf '%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$name" $((100 * weight / weight_total)) 0 0 "$listed" \
        "$repetitions" 0 0 "$estimate" >>"$plan_out"
      weight_left=$((weight_left - weight))
      continue
    fi
    # Its share of what is left (by weight), and at most a quarter more, so that a slow
    # program cannot starve the rest (time a quick or skipping one leaves goes on; one
    # allowed twice its share left the last programs, the PyTorch side among them, half
    # theirs); never so much that a later program gets under 5 s.
    share=$((weight_left > 0 ? remaining * weight / weight_left : remaining))
    limit=$((left > 1 ? share + share / 4 : remaining))
    floor_rest=$((5 * (left - 1)))
    ((limit > remaining - floor_rest)) && limit=$((remaining - floor_rest))
    ((limit < 5)) && limit=$((remaining < 5 ? remaining : 5))
    limited_by="BENCH_DEADLINE (its share of the time left)"
    if ((timeout_s != 0 && timeout_s < limit)); then limit=$timeout_s limited_by="BENCH_TIMEOUT"; fi
    ((verbose)) && echo "run-suite: $name: planned share $((100 * weight / weight_total))% = ${share}s of ${remaining}s left" \
         "(at most ${limit}s); $listed benchmarks x $repetitions repetitions"
  else
    ((verbose)) && echo "run-suite: $name: $listed benchmarks x $repetitions repetitions"
  fi
  weight_left=$((weight_left - weight))
  start=$SECONDS
  rm -f "$out/$name.partial" "$out/$name.reps.csv"
  : >"$out/logs/$name.log"
  monitor=""
  if ((progress)); then
    progress_loop "$i" "$name" "$listed" "$estimate" &
    monitor=$!
  fi
  # SIGINT first (the harness keeps what it measured), SIGKILL kill_after seconds later.
  # In the background, so that a stop signal is handled at once (bash runs a trap only
  # after a foreground command ends); verbose: the log on the terminal as it grows.
  # the program's share is its time for added repetitions (the limit, up to 5/4 of the
  # share, is a safety margin for its first ones)
  # (the share, and never closer to the limit than an eighth of it, at least 5 s: the
  # program's start-up and its last block end before the limit cuts it)
  budget_args=()
  if [[ -n $share ]]; then
    margin=$((limit / 8 > 5 ? limit / 8 : 5))
    program_budget=$((share < limit - margin ? share : limit - margin))
    ((program_budget < 1)) && program_budget=1
    budget_args=(--harness_budget="$program_budget")
  fi
  timeout --signal=INT --kill-after="$kill_after" "$limit" "${stdbuf_cmd[@]}" "$prog" \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --harness_csv="$out/$name.csv" "${rep_args[@]}" "${budget_args[@]}" "${extra_args[@]}" "${prog_args[@]}" \
    >"$out/logs/$name.log" 2>&1 &
  child=$!
  follower=""
  if ((verbose)); then
    tail -n +1 -s 0.2 -f --pid="$child" "$out/logs/$name.log" &
    follower=$!
  fi
  wait_child
  [[ -n $follower ]] && wait "$follower" 2>/dev/null
  if [[ -n $monitor ]]; then
    kill "$monitor" 2>/dev/null
    wait "$monitor" 2>/dev/null
    monitor=""
    printf '\r\033[K'
  fi
  secs=$((SECONDS - start))
  ok=0 skipped=0 errors=0 partial=0 reason=""
  if [[ -s $out/$name.csv ]]; then
    read -r ok skipped errors partial reason < <(csv_counts "$out/$name.csv")
  fi
  rows=$((ok + skipped + errors + partial))
  # A CSV with no rows (a header at most) tells nothing and trips what reads the folder:
  # the per-repetition file of a program that only skipped, or the tidy CSV of one that
  # wrote nothing; the log says why.
  for f in "$out/$name.csv" "$out/$name.reps.csv"; do
    [[ -f $f ]] && (($(awk 'NR > 1 && NF { n++ } END { print n + 0 }' "$f") == 0)) && rm -f "$f"
  done
  cut=0 cut_by="at the deadline"
  ((rc == 124 || rc == 137)) && cut=1
  # stopped (a program that ended whole as the signal came is not cut)
  [[ -n $stop_signal ]] && ((rc != 0)) && cut=1 cut_by="by SIG$stop_signal (run-suite was stopped)"
  if ((cut && rows == 0)); then
    # nothing finished: leave no empty CSV (or JSON) to trip what reads the folder
    rm -f "$out/$name.csv" "$out/$name.json" "$out/$name.reps.csv" "$out/$name.partial"
    state="not run" reason="cut at its ${limit}s share ($limited_by) before its first row"
    [[ -n $stop_signal ]] && reason="cut $cut_by before its first row"
  elif ((cut)); then
    state=partial
    if [[ -s $out/$name.partial ]] && read -r done_rows planned_rows <"$out/$name.partial"; then
      reason="cut $cut_by: $done_rows of $planned_rows rows"
    else
      reason="cut $cut_by after ${secs}s: $rows of $listed rows kept"
    fi
  elif ((rc != 0 && errors == 0)); then state=failed reason="exit status $rc; see logs/$name.log.gz"
  elif ((errors > 0)); then state=failed
  elif ((ok + partial == 0 && skipped > 0)); then state=skipped
  elif ((ok + partial == 0)); then state=failed reason="no results; see logs/$name.log.gz"
  else state=ran; ((skipped > 0)) || reason=""; fi
  [[ $state == failed ]] && any_failed=1
  # The program's console and its curves, compressed once it has ended (zless, zcat; the
  # charts read the curves as they are): they were half of a CPU results folder. The JSON
  # without Google Benchmark's indentation: the same data for compare.py and any JSON
  # reader, a fifth lighter (a file that does not parse, from a program killed mid-write,
  # stays as it is).
  for f in "$out/logs/$name.log" "$out/$name.curves.csv"; do
    [[ -s $f ]] && gzip -n -f "$f"
  done
  [[ -s $out/$name.json ]] && command -v python3 >/dev/null && python3 - "$out/$name.json" <<'PY'
import json, os, sys
path = sys.argv[1]
try:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
except (OSError, ValueError):
    sys.exit(0)
with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(data, f, separators=(",", ":"))
    f.write("\n")
os.replace(path + ".tmp", path)
PY
  printf '%s\t%s\t%d\t%d\t%d\t%d\t%s\n' "$name" "$state" $((ok + partial)) "$skipped" "$errors" "$secs" "$reason" >>"$status"
  printf '%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$name" $((100 * weight / weight_total)) "${share:-0}" "$limit" "$listed" \
    "$repetitions" "$rows" "$secs" "$estimate" >>"$plan_out"
  # The practice's line: its counts and its time.
  if [[ $state == skipped ]]; then
    line="$rows rows skipped, $(duration "$secs")${reason:+: $reason}"
  else
    detail=""
    ((skipped > 0)) && detail=" ($((ok + partial)) ran, $skipped skipped)"
    line="$state, $rows rows$detail, $errors failed, $(duration "$secs")"
    [[ -n $share ]] && line+=" (planned ${share} s, at most ${limit} s)"
    line+="${reason:+: $reason}"
  fi
  echo "[$i/$nprog] $name: $line"
  if [[ -n ${BENCH_AFTER_PROGRAM:-} ]]; then
    bash -c "$BENCH_AFTER_PROGRAM" || echo "run-suite: BENCH_AFTER_PROGRAM failed (exit $?)" >&2
  fi
done

# The summary, charts and report: their output to logs/finish.log unless verbose. Stopped,
# what finished gets its summary and report at once; the charts wait for `make charts`.
charts=1
[[ -n ${BENCH_NO_CHARTS:-} || -n $stop_signal ]] && charts=0
finish() {
  bash "$here/summarize.sh" "$out" || return 1
  if ((charts)); then bash "$here/charts.sh" "$out" || return 1; fi
  bash "$here/report.sh" "$out" || return 1
  # results/README.md: one line per run (GPU, driver, date, headline speedups)
  # only for the repository's own results/ (a RESULTS_DIR or -o elsewhere gets no index)
  if [[ $(cd "$(dirname "$out")" && pwd -P) == "$(cd "$here/.." && pwd -P)/results" ]]; then
    python3 "$here/stats.py" index "$(dirname "$out")" || return 1
  fi
}
echo
if [[ -n $stop_signal ]]; then
  echo "run-suite: stopped by SIG$stop_signal: the summary and report of what finished follow (charts: make charts RESULTS=$out)"
fi
if ((verbose)); then
  echo "run-suite: summary, charts and report"
  finish || any_failed=1
else
  if finish >"$out/logs/finish.log" 2>&1; then
    echo "run-suite: summary, charts and report written (log: $out/logs/finish.log)"
  else
    any_failed=1
    echo "run-suite: the summary, charts or report failed; the end of $out/logs/finish.log:"
    tail -n 15 "$out/logs/finish.log" | sed 's/^/  /'
  fi
fi

echo
echo "Results: $out"
if ((verbose)); then
  column -t -s $'\t' "$status" 2>/dev/null || cat "$status"
  echo
fi
echo "The plan against what ran (share: planned seconds under a deadline; limit: the most it could have had):"
awk -F'\t' -v OFS='\t' '
  NR == 1 { print "program", "rows", "estimate_s", "seconds", "actual-estimate", "share_s", "limit_s"; next }
  { off = ($9 > 0) ? sprintf("%+d%%", 100 * ($8 - $9) / $9) : "-"
    print $1, $7 "/" $5, $9, $8, off, $3, $4; e += $9; t += $8 }
  END { print "total", "", e, t, (e > 0 ? sprintf("%+d%%", 100 * (t - e) / e) : "-"), "", "" }' "$plan_out" |
  column -t -s $'\t' 2>/dev/null | sed 's/^/  /'
# The last lines: the machine, how many benchmarks ran / were skipped / failed, the three
# largest measured effects and where the report is (scripts/claims.py digest).
echo
python3 "$here/claims.py" digest "$out" 2>/dev/null || echo "Report:     $out/report.md"
[[ -n $stop_signal ]] && exit "$(stop_status)"
exit $any_failed
