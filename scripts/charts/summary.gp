# Overview: geometric-mean speedup of each tuned variant over its baseline.
# gnuplot -e "csv='DIR/summary_by_variant.csv'; outdir='DIR/charts'" summary.gp
set datafile separator ","
set datafile columnheaders
set title "Speedup over the baseline (geometric mean over parameters; >1 is faster)"
set style data histograms
set style fill solid 0.7 border -1
set boxwidth 0.8
set xtics rotate by -35 left noenhanced
set ylabel "speedup (x)"
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set rmargin 14
set grid ytics
set key off
set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2 lc rgb "#888888"
do for [term = 1:2] {
    if (term == 1) { set terminal pngcairo size 1000,600 font ",10" noenhanced; set output outdir."/summary_speedup.png" }
    else           { set terminal svg size 1000,600 dynamic font ",10" noenhanced; set output outdir."/summary_speedup.svg" }
    plot csv using (column("geomean_speedup")):xtic(strcol("practice")."/".strcol("tuned")) lc rgb "#4472c4"
    set output
}
