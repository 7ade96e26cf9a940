#!/usr/bin/env bash
# `make bench`: runs every practice program in BUILD with JSON and tidy-CSV output
# into results/<gpu>_<driver>_<yyyymmdd-hhmm>/ (cpu_<host>_... without a GPU), keeps
# going past a program that fails, then writes the speedup summary, the charts and
# report.md, and ends with a table of what ran, what was skipped and why.
#
# Environment:
#   BENCH_ARGS     extra flags for every program (e.g. --benchmark_min_time=0.05)
#   BENCH_ARGS_<name>  extra flags for one program, after BENCH_ARGS (e.g.
#                  BENCH_ARGS_batch_size='--preset=tiny' for build/bench_batch_size)
#   BENCH_FILTER   run only programs whose name matches this regex (e.g. pin_memory)
#   BENCH_REPETITIONS  repetitions of every benchmark (default 5; make bench passes it),
#                  randomly interleaved so that drift hits baseline and tuned alike; each
#                  repetition's value goes to <name>.reps.csv and into the statistics
#   BENCH_TIMEOUT  seconds one program may run before it is stopped (default 1800; 0: no limit)
#   RESULTS_DIR    write here instead of results/<slug>_<date>
#   BENCH_NO_CHARTS=1  skip the charts (a machine without gnuplot; `make charts` later)
#   BENCH_DEADLINE     a time (seconds since the epoch) by which everything, summary and
#                      report included, must be done: each program gets at most twice its
#                      share of what is left (and at most BENCH_TIMEOUT); one that cannot
#                      start in time is "not run"
#   BENCH_AFTER_PROGRAM  a shell command run after each program (e.g. to archive what
#                      has finished so far; scripts/device-check.sh uses it)
#   BENCH_COMMAND      the command recorded in command.txt (default: make bench ...)
#   BENCH_PLAN         a plan file (scripts/quick-pass.txt: its format is described there):
#                      each program's share of the time (with BENCH_DEADLINE) and arguments,
#                      the repetitions and a minimum time; the variables above win over it
#
# A program stopped at its share (SIGINT: the harness writes what it finished and a
# <practice>.partial file, "rows_done rows_planned") is `partial`, not failed: a cut
# depends on the host's speed, not on the program. One cut before its first row leaves
# no empty CSV behind and is `not run`. Each program's planned share, the benchmarks it
# lists, its rows and the time it took go to suite-plan.tsv and to the output.
set -uo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
timeout_s=${BENCH_TIMEOUT:-1800}

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
repetitions=${BENCH_REPETITIONS:-5}
if [[ ! $repetitions =~ ^[0-9]+$ ]] || ((repetitions < 1)); then
  echo "run-suite: BENCH_REPETITIONS='$repetitions' is not a whole number >= 1" >&2
  exit 1
fi
rep_args=(--benchmark_repetitions="$repetitions")
((repetitions > 1)) && rep_args+=(--benchmark_enable_random_interleaving=true)
if [[ ! $timeout_s =~ ^[0-9]+$ ]]; then # 0: no limit, as for timeout(1)
  echo "run-suite: BENCH_TIMEOUT='$timeout_s' is not a whole number of seconds" >&2
  exit 1
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
if ((${#programs[@]} == 0)); then
  echo "run-suite: no practice programs in $build${BENCH_FILTER:+ match BENCH_FILTER='$BENCH_FILTER'} (build them with make)" >&2
  exit 1
fi

slug=$("$build/context" --slug) || { echo "run-suite: $build/context failed" >&2; exit 1; }
out=${RESULTS_DIR:-results/${slug}_$(date -u +%Y%m%d-%H%M)}
mkdir -p "$out/logs" || exit 1
status="$out/suite-status.tsv"
printf 'program\tstatus\tok\tskipped\terrors\tseconds\treason\n' >"$status"
plan_out="$out/suite-plan.tsv"
printf 'program\tshare_percent\tshare_s\tlimit_s\tbenchmarks\trepetitions\trows\tseconds\n' >"$plan_out"
"$build/context" >"$out/context.txt"
{
  echo "command: ${BENCH_COMMAND:-make bench${BENCH_ARGS:+ BENCH_ARGS=\"$BENCH_ARGS\"}${BENCH_FILTER:+ BENCH_FILTER=\"$BENCH_FILTER\"}}"
  echo "repetitions: $repetitions${rep_args[1]:+ (randomly interleaved)}"
  [[ -n ${BENCH_PLAN:-} ]] && echo "plan: $BENCH_PLAN"
  for v in $(compgen -v BENCH_ARGS_); do echo "$v: ${!v}"; done
  echo "git: $(git -C "$here/.." describe --always --dirty 2>/dev/null || echo unknown)"
} >"$out/command.txt"

echo "run-suite: ${#programs[@]} practice programs -> $out"
grep -q '^no_gpu_reason=' "$out/context.txt" &&
  echo "run-suite: $(sed -n 's/^no_gpu_reason=//p' "$out/context.txt"): GPU benchmarks will be skipped"

# Each program's weight: its plan share, else the plan's mean share (1 without a plan).
weights=() weight_total=0
for prog in "${programs[@]}"; do
  name=$(basename "$prog"); name=${name#bench_}
  w=${plan_share[$name]:-}
  if [[ -z $w ]]; then
    w=1
    if ((${#plan_share[@]})); then
      w=0; for v in "${plan_share[@]}"; do w=$((w + v)); done
      w=$((w / ${#plan_share[@]}))
    fi
  fi
  ((w > 0)) || w=1
  weights+=("$w"); weight_total=$((weight_total + w))
done

# The rows of a tidy CSV by status: "ok skipped errors partial first-reason".
csv_counts() {
  awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { n[$col["status"]]++; if ($col["status"] != "ok" && why == "") why = $col["reason"] }
    END { printf "%d %d %d %d %s\n", n["ok"], n["skipped"], n["error"], n["partial"], why }' "$1"
}

any_failed=0
i=0
weight_left=$weight_total
for prog in "${programs[@]}"; do
  i=$((i + 1))
  name=$(basename "$prog"); name=${name#bench_}
  weight=${weights[i - 1]}
  prog_args_var=BENCH_ARGS_$name
  read -r -a prog_args <<<"${!prog_args_var:-}"
  listed=$(timeout 10 "$prog" --benchmark_list_tests "${prog_args[@]}" 2>/dev/null | grep -c /)
  echo
  echo "[$i/${#programs[@]}] $name  (log: $out/logs/$name.log)"
  limit=$timeout_s limited_by="BENCH_TIMEOUT" kill_after=30 share=""
  if [[ -n $deadline ]]; then
    kill_after=3 # SIGKILL soon after SIGINT: the deadline is for everything
    remaining=$((deadline - $(date +%s) - finish_reserve - kill_after))
    left=$((${#programs[@]} - i + 1))
    if ((remaining < 5)); then
      echo "run-suite: $name not run: no time left before BENCH_DEADLINE"
      printf '%s\t%s\t%d\t%d\t%d\t%d\t%s\n' "$name" "not run" 0 0 0 0 \
        "no time left before the deadline (BENCH_DEADLINE)" >>"$status"
      printf '%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$name" $((100 * weight / weight_total)) 0 0 "$listed" \
        "$repetitions" 0 0 >>"$plan_out"
      weight_left=$((weight_left - weight))
      continue
    fi
    # Its share of what is left (by weight), and at most twice that, so one slow program
    # cannot starve the rest (time a quick or skipping one leaves goes on); never so much
    # that a later program gets under 5 s.
    share=$((remaining * weight / weight_left))
    limit=$((left > 1 ? 2 * share : remaining))
    floor_rest=$((5 * (left - 1)))
    ((limit > remaining - floor_rest)) && limit=$((remaining - floor_rest))
    ((limit < 5)) && limit=$((remaining < 5 ? remaining : 5))
    limited_by="BENCH_DEADLINE (its share of the time left)"
    if ((timeout_s != 0 && timeout_s < limit)); then limit=$timeout_s limited_by="BENCH_TIMEOUT"; fi
    echo "run-suite: $name: planned share $((100 * weight / weight_total))% = ${share}s of ${remaining}s left" \
         "(at most ${limit}s); $listed benchmarks x $repetitions repetitions"
  else
    echo "run-suite: $name: $listed benchmarks x $repetitions repetitions"
  fi
  weight_left=$((weight_left - weight))
  start=$SECONDS
  rm -f "$out/$name.partial"
  # SIGINT first (the harness keeps what it measured), SIGKILL kill_after seconds later
  timeout --signal=INT --kill-after="$kill_after" "$limit" "$prog" \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --harness_csv="$out/$name.csv" "${rep_args[@]}" "${extra_args[@]}" "${prog_args[@]}" 2>&1 | tee "$out/logs/$name.log"
  rc=${PIPESTATUS[0]}
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
  cut=0
  ((rc == 124 || rc == 137)) && cut=1
  if ((cut && rows == 0)); then
    # nothing finished: leave no empty CSV (or JSON) to trip what reads the folder
    rm -f "$out/$name.csv" "$out/$name.json" "$out/$name.reps.csv" "$out/$name.partial"
    state="not run" reason="cut at its ${limit}s share ($limited_by) before its first row"
  elif ((cut)); then
    state=partial
    if [[ -s $out/$name.partial ]] && read -r done_rows planned_rows <"$out/$name.partial"; then
      reason="cut at the deadline: $done_rows of $planned_rows rows"
    else
      reason="cut at the deadline after ${limit}s: $rows of $listed rows kept"
    fi
  elif ((rc != 0 && errors == 0)); then state=failed reason="exit status $rc; see logs/$name.log"
  elif ((errors > 0)); then state=failed
  elif ((ok + partial == 0 && skipped > 0)); then state=skipped
  elif ((ok + partial == 0)); then state=failed reason="no results; see logs/$name.log"
  else state=ran; ((skipped > 0)) || reason=""; fi
  [[ $state == failed ]] && any_failed=1
  printf '%s\t%s\t%d\t%d\t%d\t%d\t%s\n' "$name" "$state" $((ok + partial)) "$skipped" "$errors" "$secs" "$reason" >>"$status"
  printf '%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$name" $((100 * weight / weight_total)) "${share:-0}" "$limit" "$listed" \
    "$repetitions" "$rows" "$secs" >>"$plan_out"
  echo "run-suite: $name: $state, $rows rows in ${secs}s${share:+ (planned ${share}s, at most ${limit}s)}${reason:+: $reason}"
  if [[ -n ${BENCH_AFTER_PROGRAM:-} ]]; then
    bash -c "$BENCH_AFTER_PROGRAM" || echo "run-suite: BENCH_AFTER_PROGRAM failed (exit $?)" >&2
  fi
done

echo
echo "run-suite: summary, charts and report"
bash "$here/summarize.sh" "$out" || any_failed=1
if [[ -z ${BENCH_NO_CHARTS:-} ]]; then bash "$here/charts.sh" "$out" || any_failed=1; fi
bash "$here/report.sh" "$out" || any_failed=1
# results/README.md: one line per run (GPU, driver, date, headline speedups)
# only for the repository's own results/ (a RESULTS_DIR or -o elsewhere gets no index)
if [[ $(cd "$(dirname "$out")" && pwd -P) == "$(cd "$here/.." && pwd -P)/results" ]]; then
  python3 "$here/stats.py" index "$(dirname "$out")" || any_failed=1
fi

echo
echo "Results: $out"
column -t -s $'\t' "$status" 2>/dev/null || cat "$status"
echo
echo "The plan against what ran (share: planned seconds; limit: the most it could have had):"
column -t -s $'\t' "$plan_out" 2>/dev/null || cat "$plan_out"
# The last lines: the machine, how many benchmarks ran / were skipped / failed, the three
# largest measured effects and where the report is (scripts/claims.py digest).
echo
python3 "$here/claims.py" digest "$out" 2>/dev/null || echo "Report:     $out/report.md"
exit $any_failed
