#!/bin/sh
# features.sh IN OUT: each row's features: x, x squared, and the target y.
set -eu
mkdir -p "$(dirname "$2")"
awk -F, -v OFS=, '{ print $1, $1 * $1, $2 }' "$1" > "$2.part"
mv "$2.part" "$2"
