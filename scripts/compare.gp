# compare.gp: one practice's grouped bar chart for `make compare`: one group per tuned
# variant (natural order), one bar per machine (its geometric-mean speedup), the 95% interval
# as a whisker, a dashed line at 1x. The chart conventions of scripts/charts/: the interval
# named in the key, plain numbers on the axis (no scientific notation), the title's second
# line the provenance (each machine and the date of its run).
# Everything arrives as data, never as code:
#   gnuplot -c compare.gp DATA OUT_STEM TITLE MACHINES YMAX
# DATA: charts/compare_<practice>.dat from scripts/stats.py compare (tab-separated:
# variant, then speedup, low, high per machine, with a header line naming each machine);
# OUT_STEM gets .png and .svg; TITLE: its lines apart by newlines; MACHINES: how many
# machines; YMAX: the top of the y axis.
data = ARG1
stem = ARG2
machines = int(ARG4)
ymax = real(ARG5)
height = 540 + 22 * machines  # room for the key's line per machine below the frame
set datafile separator "\t"
set datafile missing "NaN"
set style data histograms
set style histogram errorbars gap 2 lw 1.5
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:ymax]
set format y "%.2f"
set ylabel "speedup over the baseline (x)"
set xtics rotate by -25 left noenhanced
set key below left Left reverse noenhanced  # outside the frame: it never hides a bar
set key title "bar: speedup (geometric mean over the machine's points); whisker: its 95% interval" noenhanced
set bmargin 8 + machines  # the rotated variant names, then the key: gnuplot alone lets them overlap
set grid ytics
set title ARG3 noenhanced
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5 lc rgb "#555555" front
do for [fmt in "png svg"] {
    if (fmt eq "png") { set terminal pngcairo size 1200,height font ",12" }
    else { set terminal svg size 1200,height font ",12" }
    set output stem . "." . fmt
    plot for [i=0:machines-1] data using 2+3*i:3+3*i:4+3*i:xtic(1) title columnhead(2+3*i)
    unset output
}
