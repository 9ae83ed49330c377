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
# The workload's random blobs train no chunk dictionary: a pack holding one and an entry compressed
# with it, from the known-answer vector of Docs/on-disk-format.md (FormatTests).
dictionary_pack="$(dirname "$store")/dictionary.pack"
printf '%s' "43535041434b0000010000000100000000000000000000000000000069fbcffb4353424504000000d508821f8039994e7df7ac08e44008787e08f035602ceb91b972c918a4e207b1330000003300000000d2496b9e70c6dc68656c6c6f20776f726c642c2068656c6c6f2073746f72652c2068656c6c6f207061636b2c2068656c6c6f206368756e6b2e2043534245090000003b30e5574457aa6fe6fe9b4fdf027bf6eef3d62c8af9f3b822b173cc14818f22320000002500000000d2496be08cd02c200000000000000028b52ffd2032a50000486368756e7061636b2e0300503840a98252a280" | xxd -r -p > "$dictionary_pack"
for flags in 00 01 03; do seed pack "$flags" "$dictionary_pack" dictionary; done
rm -rf "$(dirname "$store")"
du -sh Fuzz/corpus/*
