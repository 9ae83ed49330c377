#!/usr/bin/env bash
# Regenerates the committed seed corpora (Fuzz/corpus/<target>/) from a real store: a small run of
# the crash workload (Tests/CrashWorkload), whose WAL segments, checkpoint and packs become seeds,
# each prefixed with the flags byte its fuzz target reads (see the targets' sources).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product CrashWorkload >/dev/null
workload="$(swift build --show-bin-path)/CrashWorkload"
store="$(mktemp -d)/store"
"$workload" "$store" 11 0 --threads 1 --transactions 40 >/dev/null 2>&1
"$workload" "$store" 11 1 --threads 2 --transactions 10 >/dev/null 2>&1

seed() {  # seed <target> <flags as two hex digits> <file> <name>
    mkdir -p "Fuzz/corpus/$1"
    { printf "\\x$2"; cat "$3"; } > "Fuzz/corpus/$1/$4-$2"
}
rm -rf Fuzz/corpus
for segment in "$store"/wal/*.log; do
    for flags in 00 01 03; do seed wal "$flags" "$segment" "$(basename "$segment" .log)"; done
done
for checkpoint in "$store"/checkpoint/*.ckpt; do
    for flags in 00 01; do seed checkpoint "$flags" "$checkpoint" "$(basename "$checkpoint" .ckpt)"; done
done
# The smallest sealed pack (it ends in the index footer, "CSPACKIX") and the smallest unsealed one.
sealed="" unsealed=""
for pack in $(ls -S -r "$store"/packs/*.pack); do
    if [ "$(tail -c 32 "$pack" | head -c 8)" = "CSPACKIX" ]; then sealed=${sealed:-$pack}; else unsealed=${unsealed:-$pack}; fi
done
for pack in $sealed $unsealed; do
    for flags in 00 01 03; do seed pack "$flags" "$pack" "$(basename "$pack" .pack)"; done
done
rm -rf "$(dirname "$store")"
du -sh Fuzz/corpus/*
