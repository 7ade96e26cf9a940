# Charts of bench_pin_memory: copy bandwidth versus size per variant (host-to-device
# and device-to-host), and time per step of the copy/compute and allocation macros.
# gnuplot -e "csv='DIR/pin_memory.csv'; outdir='DIR/charts'" pin_memory.gp
set datafile separator ","
set datafile columnheaders
set datafile missing NaN   # rows filtered out below do not break the lines
set key top left box opaque
set grid
ok(p) = strcol("status") eq "ok" && strcol("practice") eq p

copy_variants = "pageable pinned pinned_async registered_async"
do for [dir = 1:0:-1] {
    name = dir ? "h2d" : "d2h"
    set title (dir ? "Host-to-device" : "Device-to-host") . " copy bandwidth (CUDA events)"
    set xlabel "copy size (bytes)"
    set ylabel "GB/s"
    set logscale x 2
    set format x "%.0b%BB"
    unset logscale y
    set yrange [0:*]
    sel(v) = (ok("pin_memory") && strcol("variant") eq v && column("param_h2d") == dir) ? 1 : NaN
    do for [term = 1:2] {
        if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/pin_memory_bw_".name.".png" }
        else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/pin_memory_bw_".name.".svg" }
        plot for [v in copy_variants] csv using (column("param_bytes") * sel(v)):(column("bytes_per_second") / 1e9) \
             with linespoints pointsize 0.8 title v
        set output
    }
}
unset logscale x
set format x "%g"

# Step time (ms) per batch size, one line per variant and compute intensity.
do for [practice in "pin_memory_step pin_memory_alloc"] {
    if (practice eq "pin_memory_step") { variants = "pageable_blocking pinned_async_overlap"; what = "copy/compute overlap (wall clock)" }
    else { variants = "pinned_per_batch pinned_once"; what = "pinned allocation per batch vs once (wall clock)" }
    set title "Time per training step: ".what
    set xlabel "batch size (MiB)"
    set ylabel "ms per step"
    set logscale x 2
    set logscale y
    set yrange [*:*]
    steps = 8
    selp(v, f) = (ok(practice) && strcol("variant") eq v && column("param_fma") == f) ? 1 : NaN
    do for [term = 1:2] {
        if (term == 1) { set terminal pngcairo size 900,560 font ",10" noenhanced; set output outdir."/".practice.".png" }
        else           { set terminal svg size 900,560 dynamic font ",10" noenhanced; set output outdir."/".practice.".svg" }
        plot for [v in variants] for [f in "64 512 4096"] \
             csv using (column("param_bytes") / 1048576.0 * selp(v, f + 0)):(column("time") / steps) \
             with linespoints pointsize 0.8 title v." fma/elem=".f
        set output
    }
}
