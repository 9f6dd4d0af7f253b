#!/bin/sh
# download.sh SOURCE OUT: fetch one shard. Here the "remote" shard is the raw file next to the
# job (a real pipeline would run: curl -fsSL -o "$2" "https://example.com/shards/$(basename "$1")").
set -eu
mkdir -p "$(dirname "$2")"
cp "$1" "$2.part"
mv "$2.part" "$2"
