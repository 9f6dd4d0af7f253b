#!/bin/sh
# make-raw.sh N: replace the shards in raw/ with N generated ones (raw/0001.csv ... for N = 1000),
# to see the job at another size without editing it. `git checkout raw` brings the 8 back.
set -eu
n=${1:?usage: sh bin/make-raw.sh N}
cd "$(dirname "$0")/.."
mkdir -p raw
rm -f raw/*.csv
width=${#n}
[ "$width" -lt 2 ] && width=2
awk -v n="$n" -v width="$width" 'BEGIN {
  for (s = 1; s <= n; s++) {
    file = sprintf("raw/%0" width "d.csv", s)
    print "# shard " s ": x,y rows, as the source sends them (a comment, a blank line, a row without y)" > file
    print "x,y" >> file
    for (j = 0; j < 20; j++) { x = s * 20 + j; printf "%d,%.2f\n", x, 3 * x + 7 + ((x * 37) % 11) - 5 >> file }
    print "" >> file
    print s * 20 + 20 "," >> file
    close(file)
  }
}'
echo "raw/: $n shards"
