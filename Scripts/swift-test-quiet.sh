#!/usr/bin/env bash
# Runs `swift test "$@"` with its whole output kept in $TEST_LOG (default .build/test.log) and shown
# without the engine's info-, debug- and trace-level log lines (tests run stores with the default
# logger, and those lines are megabytes). Warnings and errors logged stay visible. When tests fail,
# the failures and their recorded issues are repeated at the end, so the last lines of a CI log name
# them. Exits with swift test's status.
set -uo pipefail

log="${TEST_LOG:-.build/test.log}"
mkdir -p "$(dirname "$log")"
engine_log_line='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+[+-][0-9]{4} (trace|debug|info|notice) '

"${SWIFT:-swift}" test "$@" 2>&1 | tee "$log" | { grep -Ev "$engine_log_line" || true; }
status=${PIPESTATUS[0]}

if [ "$status" -ne 0 ]; then
    echo
    echo "── swift test $* failed (exit $status); the failures, from $log: ──"
    grep -E '✘|recorded an issue|Expectation failed|Caught error|fatal error|Fatal error|signal [0-9]+|error:' "$log" \
        | grep -Ev "$engine_log_line" | tail -n 60
fi
exit "$status"
