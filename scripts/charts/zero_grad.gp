# Charts of bench_zero_grad, PNG and SVG:
#   zero_grad_step   time per training step, memset + accumulate vs set_to_none, per preset,
#                    with the saving of set_to_none in percent above each pair
#   zero_grad_micro  the two pieces apart: zeroing the gradients (per tensor, flat) and the
#                    weight-gradient pass (accumulate, overwrite), per preset
# gnuplot -e "csv='DIR/zero_grad.csv'; outdir='DIR/charts'" zero_grad.gp
set datafile separator ","
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key top left box opaque
set xtics noenhanced
# One line per preset: preset, memset ms, set_to_none ms, saving % (rows with status ok).
table = "< awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " . \
        "$c[\"practice\"] == \"zero_grad\" && $c[\"status\"] == \"ok\" { " . \
        "p = $c[\"param_preset\"]; if (!(p in seen)) { seen[p] = 1; order[++n] = p } " . \
        "t[p, $c[\"variant\"]] = $c[\"step_ms\"] } " . \
        "END { for (i = 1; i <= n; i++) { p = order[i]; a = t[p, \"memset\"]; b = t[p, \"set_to_none\"]; " . \
        "if (a > 0 && b > 0) printf \"%s,%g,%g,%.1f\\n\", p, a, b, 100 * (1 - b / a) } }' '" . csv . "'"
stats table using 2 nooutput
if (STATS_records == 0) { print "zero_grad.gp: no measured zero_grad pairs in ".csv; exit }
npairs = STATS_records
set title "zero_grad: time per training step (wall clock; lower is better); labels: time set_to_none saves"
set ylabel "ms per step (log scale)"
set logscale y
set yrange [*:*]
set offsets 0, 0, graph 0.15, 0
do for [term = 1:2] {
    if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/zero_grad_step.png" }
    else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/zero_grad_step.svg" }
    plot table using 2:xtic(1) title "memset + accumulate (set_to_none=False)" lc rgb "#a5a5a5", \
         table using 3 title "set_to_none=True" lc rgb "#4472c4", \
         table using ($0):($3 * 1.25):(sprintf("%+.1f%%", $4)) with labels notitle
    set output
}

micro = "< awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " . \
        "($c[\"practice\"] == \"zero_grad_memset\" || $c[\"practice\"] == \"zero_grad_wgrad\") && $c[\"status\"] == \"ok\" { " . \
        "p = $c[\"param_preset\"]; if (!(p in seen)) { seen[p] = 1; order[++n] = p } " . \
        "f = $c[\"time_unit\"] == \"ns\" ? 1e-3 : $c[\"time_unit\"] == \"ms\" ? 1e3 : $c[\"time_unit\"] == \"s\" ? 1e6 : 1; " . \
        "t[p, $c[\"variant\"]] = $c[\"time\"] * f } " . \
        "END { for (i = 1; i <= n; i++) { p = order[i]; " . \
        "printf \"%s,%g,%g,%g,%g\\n\", p, t[p, \"per_tensor\"], t[p, \"flat_buffer\"], t[p, \"accumulate\"], t[p, \"overwrite\"] } }' '" . csv . "'"
stats micro using 2 nooutput
if (STATS_records > 0) {
    set title "zero_grad, the pieces: zeroing every gradient, and the weight-gradient pass"
    set ylabel "microseconds per pass (log scale)"
    set offsets 0, 0, graph 0.05, 0
    do for [term = 1:2] {
        if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/zero_grad_micro.png" }
        else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/zero_grad_micro.svg" }
        plot micro using 2:xtic(1) title "zero: memset per tensor" lc rgb "#c9c9c9", \
             micro using 3 title "zero: one flat memset" lc rgb "#7f7f7f", \
             micro using 4 title "weight gradients, beta=1 (accumulate)" lc rgb "#ed7d31", \
             micro using 5 title "weight gradients, beta=0 (overwrite)" lc rgb "#4472c4"
        set output
    }
}
