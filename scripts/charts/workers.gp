# Charts of bench_workers (the num_workers practice), PNG and SVG:
#   workers_images_per_second  images/s versus num_workers: loader alone, loader feeding
#                              training steps, and raw 1-core libjpeg-turbo decode
#   workers_wait_per_step      per training step: time waiting for the batch and step time
# gnuplot -e "csv='DIR/workers.csv'; outdir='DIR/charts'" workers.gp
set datafile separator ","
set datafile columnheaders
set datafile missing NaN
set key below box
set grid
set bmargin 6
ok(p) = strcol("status") eq "ok" && strcol("practice") eq p
# Rows of a practice with status ok, counted without gnuplot (an empty plot is an error).
rows(p) = int(system(sprintf("awk -F, 'NR > 1 && $1 == \"%s\" && $6 == \"ok\"' '%s' | wc -l", p, csv)))
n_loader = rows("num_workers")
n_train = rows("num_workers_train")
n_ref = rows("num_workers_decode_ref")
if (n_loader + n_train == 0) { print "workers.gp: no ok num_workers rows in ".csv; exit }

raw = NaN
if (n_ref > 0) {
    stats csv using (ok("num_workers_decode_ref") ? column("images_per_second") : NaN) nooutput
    raw = STATS_max
}
base = NaN
if (n_loader > 0) {
    stats csv using (ok("num_workers") && column("num_workers") == 0 ? column("images_per_second") : NaN) nooutput
    base = STATS_max
    stats csv using (ok("num_workers") ? column("num_workers") : NaN) nooutput
    wmax = STATS_max
}

set title "Images per second versus num_workers (wall clock)"
set xlabel "num_workers (0 = load in the training process)"
set ylabel "images / s"
set yrange [0:*]
set xrange [-0.3:*]
set xtics 1
# Each series only when it has rows: gnuplot refuses to plot nothing.
cmd = ""
if (n_loader > 0) {
    cmd = cmd . "csv using (ok('num_workers') ? column('num_workers') : NaN):(column('images_per_second')) with linespoints lw 2 pt 7 title 'loader alone', "
    cmd = cmd . "[0:wmax] base * (x > 1 ? x : 1) with lines dt 3 lc 'gray40' title 'ideal: num_workers=0 rate x num_workers', "
}
if (n_train > 0) {
    cmd = cmd . "csv using (ok('num_workers_train') ? column('num_workers') : NaN):(column('images_per_second')) with linespoints lw 2 pt 5 title 'loader + training steps', "
}
if (n_ref > 0) {
    cmd = cmd . "raw with lines dt 2 lc 'black' title 'raw libjpeg-turbo decode, 1 core', "
}
cmd = cmd[1:strlen(cmd) - 2]
do for [term = 1:2] {
    if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/workers_images_per_second.png" }
    else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/workers_images_per_second.svg" }
    eval "plot ".cmd
    set output
}

# Bars per worker count, evenly spaced (0, 1, 2, 4, ... at 0, 1, 2, 3, ...).
pos(n) = n < 1 ? 0 : 1 + log(n) / log(2)
set title "Training loop: time per step, and the part spent waiting for the batch (wall clock)"
set ylabel "ms per step"
set xlabel "num_workers"
set style fill solid 0.8 border -1
set boxwidth 0.35
set xrange [-0.6:*]
set key below box
if (n_train > 0) {
    stats csv using (ok("num_workers_train") ? column("num_workers") : NaN) nooutput
    tmax = STATS_max
    set xtics ("0" 0)
    do for [k = 0:10] { if (2**k < tmax) { set xtics add (sprintf("%d", 2**k) pos(2**k)) } }
    set xtics add (sprintf("%d", tmax) pos(tmax))
    do for [term = 1:2] {
        if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/workers_wait_per_step.png" }
        else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/workers_wait_per_step.svg" }
        plot csv using (ok("num_workers_train") ? pos(column("num_workers")) - 0.19 : NaN):(column("wait_ms_per_step")) \
                 with boxes title "waiting for the batch", \
             csv using (ok("num_workers_train") ? pos(column("num_workers")) + 0.19 : NaN):(column("step_ms")) \
                 with boxes title "whole step (wait + train)"
        set output
    }
}
