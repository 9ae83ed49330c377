#!/usr/bin/env bash
# Builds the libFuzzer targets (with AddressSanitizer) and runs each for FUZZ_SECONDS (default 60)
# on its committed seed corpus (Fuzz/corpus/<name>) plus a working corpus (Fuzz/corpus-work/, not
# committed). A crash, a hang (-timeout), or a single allocation over FUZZ_MALLOC_LIMIT_MB
# (default 64; the targets use limits that never need more) fails the run and leaves the input
# in Fuzz/corpus-work/artifacts/<name>/. Prints the executions, coverage and peak RSS per target and
# records them in Fuzz/.build-fuzz/reliability/fuzz.json.
#   FUZZ_SECONDS=600 Fuzz/fuzz.sh            longer
#   FUZZ_TARGETS="FuzzPack" Fuzz/fuzz.sh      one target
set -euo pipefail
cd "$(dirname "$0")"
seconds=${FUZZ_SECONDS:-60}
malloc_limit=${FUZZ_MALLOC_LIMIT_MB:-64}
targets=${FUZZ_TARGETS:-"FuzzWALSegment FuzzCheckpoint FuzzPack"}
# Debug (-Onone, so the targets can `@testable import ContentStore`), in a scratch directory of its
# own. `--sanitize=fuzzer` alone does not reliably reach every compile with this toolchain (the
# engine then links without coverage counters and libFuzzer sees ~30 edges), so the flags are
# also passed to swiftc directly; `--sanitize=fuzzer` stays, for SwiftPM to leave libFuzzer's
# main alone. lld, because gold can drop the counters too. The check below refuses to fuzz blind.
scratch=.build-fuzz
build=(swift build -c debug --scratch-path "$scratch" --sanitize=fuzzer --sanitize=address
       -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld)
"${build[@]}"
bin=$("${build[@]}" --show-bin-path)
for target in $targets; do
    counters=$("$bin/$target" -runs=0 2>&1 | grep -o 'Loaded 1 modules *([0-9]*' | grep -o '[0-9]*$' || echo 0)
    if [ "${counters:-0}" -lt 1000 ]; then
        echo "$target has only ${counters:-0} coverage counters: the engine is not instrumented" >&2
        exit 2
    fi
done

# The malloc limit must be live, or an oversized allocation would pass unnoticed: a pack whose one
# entry is a 277-byte zstd frame of 8 MiB (limit-check/pack-8mib-blob, flags byte 1: repair the
# checksums) must trip a 4 MiB limit.
if [[ " $targets " == *" FuzzPack "* ]] && "$bin/FuzzPack" -malloc_limit_mb=4 limit-check/pack-8mib-blob >/dev/null 2>&1; then
    echo "FuzzPack decoded an 8 MiB blob under -malloc_limit_mb=4: the malloc limit is not enforced" >&2
    exit 2
fi

corpus_of() {
    case $1 in FuzzWALSegment) echo wal ;; FuzzCheckpoint) echo checkpoint ;; FuzzPack) echo pack ;; *) echo "$1" ;; esac
}

# A count for the JSON summary, or null when libFuzzer did not print it.
number() { if [[ $1 =~ ^[0-9]+$ ]]; then echo "$1"; else echo null; fi; }

summary=()
records=()
status=0
for target in $targets; do
    name=$(corpus_of "$target")
    work="corpus-work/$name"
    artifacts="corpus-work/artifacts/$name/"
    mkdir -p "$work" "$artifacts"
    log="corpus-work/$name.log"
    echo "== $target: ${seconds}s"
    set +e
    "$bin/$target" "$work" "corpus/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -malloc_limit_mb="$malloc_limit" -print_final_stats=1 -artifact_prefix="$artifacts" >"$log" 2>&1
    code=$?
    set -e
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    if [ $code -ne 0 ]; then
        status=1
        tail -40 "$log"
        summary+=("$target: FAILED (exit $code) after $runs executions; input in $artifacts")
    else
        summary+=("$target: $runs executions in ${seconds}s ($rate/s), coverage $coverage edges, peak RSS $rss MB, no crash, hang or oversized allocation")
    fi
    records+=("\"$target\": {\"executions\": $(number "$runs"), \"seconds\": $seconds, \"coverageEdges\": $(number "$coverage"), \"peakRSSMegabytes\": $(number "$rss"), \"exitCode\": $code}")
done
echo
printf '%s\n' "${summary[@]}"
# The counts, for Docs/reliability.md and the issue's closing note.
mkdir -p "$scratch/reliability"
{ echo "{"; printf '  %s,\n' "${records[@]}" | sed '$ s/,$//'; echo "}"; } >"$scratch/reliability/fuzz.json"
echo "recorded in Fuzz/$scratch/reliability/fuzz.json"
exit $status
