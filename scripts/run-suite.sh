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
set -uo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
timeout_s=${BENCH_TIMEOUT:-1800}
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
"$build/context" >"$out/context.txt"
{
  echo "command: ${BENCH_COMMAND:-make bench${BENCH_ARGS:+ BENCH_ARGS=\"$BENCH_ARGS\"}${BENCH_FILTER:+ BENCH_FILTER=\"$BENCH_FILTER\"}}"
  echo "repetitions: $repetitions${rep_args[1]:+ (randomly interleaved)}"
  for v in $(compgen -v BENCH_ARGS_); do echo "$v: ${!v}"; done
  echo "git: $(git -C "$here/.." describe --always --dirty 2>/dev/null || echo unknown)"
} >"$out/command.txt"

echo "run-suite: ${#programs[@]} practice programs -> $out"
grep -q '^no_gpu_reason=' "$out/context.txt" &&
  echo "run-suite: $(sed -n 's/^no_gpu_reason=//p' "$out/context.txt"): GPU benchmarks will be skipped"

any_failed=0
i=0
for prog in "${programs[@]}"; do
  i=$((i + 1))
  name=$(basename "$prog"); name=${name#bench_}
  echo
  echo "[$i/${#programs[@]}] $name  (log: $out/logs/$name.log)"
  limit=$timeout_s limited_by="BENCH_TIMEOUT" kill_after=30
  if [[ -n $deadline ]]; then
    kill_after=3 # SIGKILL soon after SIGINT: the deadline is for everything
    remaining=$((deadline - $(date +%s) - finish_reserve - kill_after))
    if ((remaining < 5)); then
      echo "run-suite: $name not run: no time left before BENCH_DEADLINE"
      printf '%s\t%s\t%d\t%d\t%d\t%d\t%s\n' "$name" "not run" 0 0 0 0 \
        "no time left before the deadline (BENCH_DEADLINE)" >>"$status"
      any_failed=1
      continue
    fi
    # A fair share: at most twice this program's part of what is left, so one slow
    # program cannot starve the rest (time a quick or skipping one leaves goes on).
    left=$((${#programs[@]} - i + 1))
    share=$((left > 1 ? 2 * remaining / left : remaining))
    ((share < 5)) && share=$((remaining < 5 ? remaining : 5))
    if ((timeout_s == 0 || share < timeout_s)); then limit=$share limited_by="BENCH_DEADLINE (its share of the time left)"; fi
  fi
  prog_args_var=BENCH_ARGS_$name
  read -r -a prog_args <<<"${!prog_args_var:-}"
  start=$SECONDS
  # SIGINT first (the harness keeps what it measured), SIGKILL kill_after seconds later
  timeout --signal=INT --kill-after="$kill_after" "$limit" "$prog" \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --harness_csv="$out/$name.csv" "${rep_args[@]}" "${extra_args[@]}" "${prog_args[@]}" 2>&1 | tee "$out/logs/$name.log"
  rc=${PIPESTATUS[0]}
  secs=$((SECONDS - start))
  ok=0 skipped=0 errors=0 reason=""
  if [[ -s $out/$name.csv ]]; then
    read -r ok skipped errors reason < <(awk -F, '
      NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
      { n[$col["status"]]++; if ($col["status"] != "ok" && why == "") why = $col["reason"] }
      END { printf "%d %d %d %s\n", n["ok"], n["skipped"], n["error"], why }' "$out/$name.csv")
  fi
  if ((rc == 124 || rc == 137)); then state=failed reason="stopped after ${limit}s ($limited_by)"
  elif ((rc != 0 && errors == 0)); then state=failed reason="exit status $rc; see logs/$name.log"
  elif ((errors > 0)); then state=failed
  elif ((ok == 0 && skipped > 0)); then state=skipped
  elif ((ok == 0)); then state=failed reason="no results; see logs/$name.log"
  else state=ran; ((skipped > 0)) || reason=""; fi
  [[ $state == failed ]] && any_failed=1
  printf '%s\t%s\t%d\t%d\t%d\t%d\t%s\n' "$name" "$state" "$ok" "$skipped" "$errors" "$secs" "$reason" >>"$status"
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
# The last lines: the machine, how many benchmarks ran / were skipped / failed, the three
# largest measured effects and where the report is (scripts/claims.py digest).
echo
python3 "$here/claims.py" digest "$out" 2>/dev/null || echo "Report:     $out/report.md"
exit $any_failed
