#!/bin/sh
# merge.sh OUT SHARD...: every shard's features in one table, with its header.
set -eu
out=$1
shift
mkdir -p "$(dirname "$out")"
{ echo "x,x2,y"; cat "$@"; } > "$out.part"
mv "$out.part" "$out"
