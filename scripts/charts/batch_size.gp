# Charts of bench_batch_size, PNG and SVG:
#   batch_size_throughput   images/s against batch size, one line per preset, the knee (the
#                           last batch that still raised throughput by 10% or more) marked
#   batch_size_memory       peak memory against batch size: the core's own and, on a GPU,
#                           the device's used memory (libraries included)
#   batch_size_convergence  held-out accuracy against training wall time and against
#                           images seen, one line per LR rule (from batch_size.curves.csv)
# gnuplot -e "csv='DIR/batch_size.csv'; outdir='DIR/charts'" batch_size.gp
set datafile separator ","
set datafile columnheaders
set datafile missing NaN
set grid
set key top left box opaque noenhanced
ok(p) = strcol("status") eq "ok" && strcol("practice") eq p
presets = system("awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " . \
                 "$c[\"practice\"] == \"batch_size\" && $c[\"status\"] == \"ok\" && !seen[$c[\"param_preset\"]]++ " . \
                 "{ printf \"%s \", $c[\"param_preset\"] }' '" . csv . "'")
if (strlen(presets) > 0) {
    # The knee of each preset: the largest batch whose doubling from the one before still
    # gained 10% or more images/s.
    knees = "< awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } " . \
            "$c[\"practice\"] == \"batch_size\" && $c[\"status\"] == \"ok\" { p = $c[\"param_preset\"]; " . \
            "b = $c[\"param_batch\"] + 0; r = $c[\"images_per_second\"] + 0; " . \
            "if (!(p in last) || r >= 1.1 * last[p]) knee[p] = b SUBSEP r; last[p] = r } " . \
            "END { print \"preset,batch,images_per_second\"; " . \
            "for (p in knee) { split(knee[p], k, SUBSEP); printf \"%s,%s,%s\\n\", p, k[1], k[2] } }' '" . csv . "'"
    set title "Batch size: training throughput (wall clock); circles: the knee"
    set xlabel "batch size"
    set ylabel "images / s (log scale)"
    set logscale x 2
    set logscale y
    do for [term = 1:2] {
        if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/batch_size_throughput.png" }
        else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/batch_size_throughput.svg" }
        plot for [p in presets] csv using (ok("batch_size") && strcol("param_preset") eq p ? column("param_batch") : NaN):(column("images_per_second")) \
                 with linespoints lw 2 pointsize 0.8 title p, \
             knees using 2:3 with points pt 6 ps 3 lw 2 lc rgb "black" title "knee (next doubling gains < 10%)"
        set output
    }
    stats csv using (ok("batch_size") ? column("device_used_mib") : NaN) nooutput
    device = STATS_max > 0
    set title "Batch size: peak memory (the core's own" . (device ? "; dashed: the device's used memory)" : ")")
    set ylabel "MiB (log scale)"
    do for [term = 1:2] {
        if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/batch_size_memory.png" }
        else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/batch_size_memory.svg" }
        if (device) {
            plot for [i = 1:words(presets)] csv using (ok("batch_size") && strcol("param_preset") eq word(presets, i) ? column("param_batch") : NaN):(column("peak_mib")) \
                     with linespoints lw 2 pointsize 0.8 lc i title word(presets, i), \
                 for [i = 1:words(presets)] csv using (ok("batch_size") && strcol("param_preset") eq word(presets, i) ? column("param_batch") : NaN):(column("device_used_mib")) \
                     with lines dt 2 lc i notitle
        } else {
            plot for [i = 1:words(presets)] csv using (ok("batch_size") && strcol("param_preset") eq word(presets, i) ? column("param_batch") : NaN):(column("peak_mib")) \
                     with linespoints lw 2 pointsize 0.8 lc i title word(presets, i)
        }
        set output
    }
    unset logscale
}

curves = csv[1:strlen(csv) - 4] . ".curves.csv"
variants = system("awk -F, 'NR > 1 && $1 == \"batch_size_convergence\" && $8 == \"heldout_accuracy\" && !seen[$2]++ " . \
                  "{ printf \"%s \", $2 }' '" . curves . "' 2>/dev/null")
if (strlen(variants) > 0) {
    acc(v) = strcol("practice") eq "batch_size_convergence" && strcol("metric") eq "heldout_accuracy" && strcol("variant") eq v
    set ylabel "held-out accuracy"
    set yrange [0:1.02]
    set key bottom right box opaque noenhanced
    do for [axis = 1:2] {
        name = axis == 1 ? "batch_size_convergence_time" : "batch_size_convergence_images"
        set xlabel (axis == 1 ? "training wall time (s; evaluations not counted)" : "images seen")
        set title "Batch size x8 and the LR rules: held-out accuracy against " . (axis == 1 ? "time" : "images seen")
        do for [term = 1:2] {
            if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/".name.".png" }
            else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/".name.".svg" }
            plot for [v in variants] curves using (acc(v) ? column(axis == 1 ? "seconds" : "images") : NaN):(column("value")) \
                 with linespoints lw 2 pointsize 0.6 title v
            set output
        }
    }
}
