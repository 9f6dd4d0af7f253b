#!/bin/sh
# clean.sh IN OUT: keep the data rows (x,y with both values): no header, comments or blank lines.
set -eu
mkdir -p "$(dirname "$2")"
awk -F, '/^#/ || /^x,/ || NF != 2 || $1 == "" || $2 == "" { next } { print $1 "," $2 }' "$1" > "$2.part"
mv "$2.part" "$2"
