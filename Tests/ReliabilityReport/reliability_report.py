#!/usr/bin/env python3
"""Runs the reliability campaigns and regenerates the table in Docs/reliability.md.

`make reliability-report` calls this. It runs, in order: every power-cut sweep (PowerLossTests and
PowerCutDuringRecoveryTests), the I/O-fault sweep (IOFaultTests), the process-crash test with
CRASH_KILLS kills from CRASH_SEED, and each fuzz target for FUZZ_SECONDS (0 skips fuzzing). The
tests write their counts as JSON (RELIABILITY_REPORT_DIR); this script reads those files, never a
test's printed output, and replaces what lies between the two markers in Docs/reliability.md with
a table naming the commit the campaigns ran on. A campaign that fails is recorded as failed, and
the script exits non-zero after writing the table.
"""
import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import time

BEGIN = "<!-- reliability-report:begin -->"
END = "<!-- reliability-report:end -->"
WORKLOADS = ["commits", "checkpoint", "packRewrite", "collection", "smallCommits", "chunkedBlobs"]


def git(*arguments):
    return subprocess.run(["git", *arguments], capture_output=True, text=True, check=True).stdout.strip()


def run(phase, command, environment, log_directory):
    """Runs one campaign; returns (exit code, wall seconds). Its output goes to a log file."""
    log = log_directory / f"{phase}.log"
    print(f"reliability-report: {phase}: {' '.join(command)} (log: {log})", flush=True)
    started = time.monotonic()
    with open(log, "w") as output:
        code = subprocess.run(command, env={**os.environ, **environment}, stdout=output, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - started
    print(f"reliability-report: {phase}: exit {code} after {seconds:.0f} s", flush=True)
    return code, seconds


def load(directory, name):
    path = directory / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def duration(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def number(value):
    return f"{value:,}" if isinstance(value, int) else "—"


def table(report_directory, fuzz_file, outcomes, arguments, commit):
    rows = []

    def verdict(phase):
        code, seconds = outcomes[phase]
        return ("passed" if code == 0 else f"**FAILED** (exit {code})") + f", {duration(seconds)}"

    if "sweeps" in outcomes:
        for name, label in [("power-loss", "power loss, every sync point"), ("power-loss-recovery", "power loss during recovery")]:
            parts, totals = [], {}
            for workload in WORKLOADS:
                counts = load(report_directory, f"{name}-{workload}")
                if counts is None:
                    parts.append(f"{workload} not recorded")
                    continue
                for key, value in counts.items():
                    totals[key] = totals.get(key, 0) + value
                if name == "power-loss":
                    parts.append(f"{workload} {counts['syncPoints']}")
                else:
                    parts.append(f"{workload} {counts['crashImages']}/{counts['recoverySyncPoints']}/{counts['images']}")
            if name == "power-loss":
                summary = (f"{number(totals.get('syncPoints'))} sync points ({', '.join(parts)}); "
                           f"{number(totals.get('images'))} disk images opened and checked")
            else:
                summary = (f"{number(totals.get('crashImages'))} crash images, {number(totals.get('recoverySyncPoints'))} sync points "
                           f"of recovery, {number(totals.get('images'))} images of a second cut checked "
                           f"(per workload crash images/recovery syncs/images: {', '.join(parts)})")
            rows.append((label, summary, verdict("sweeps")))
    if "faults" in outcomes:
        parts, calls, faults = [], 0, 0
        for workload in WORKLOADS:
            counts = load(report_directory, f"io-faults-{workload}")
            if counts is None:
                parts.append(f"{workload} not recorded")
                continue
            calls += counts["calls"]
            faults += counts["faultsInjected"]
            parts.append(f"{workload} {counts['calls']} → {counts['faultsInjected']}")
        rows.append(("I/O faults, every call × {ENOSPC, EIO}", f"{number(calls)} calls, {number(faults)} faults injected ({', '.join(parts)})",
                     verdict("faults")))
    if "crashes" in outcomes:
        counts = load(report_directory, "process-crashes")
        if counts is None:
            summary = f"not recorded ({arguments.kills} kills asked for, seed {arguments.seed})"
        else:
            summary = (f"{number(counts['kills'])} kills (seed {counts['seed']}), {number(counts['survived'])} survived; "
                       f"{number(counts['acknowledgedCommitsChecked'])} acknowledged commits checked, "
                       f"{number(counts['unacknowledgedCommitsFoundApplied'])} unacknowledged found applied (the one in flight), "
                       f"{number(counts['earlyExits'])} early exits")
        rows.append(("process crashes (SIGKILL)", summary, verdict("crashes")))
    if "fuzz" in outcomes:
        fuzz = json.loads(fuzz_file.read_text()) if fuzz_file.exists() else {}
        for target, counts in sorted(fuzz.items()):
            rows.append((f"fuzzing, {target}", f"{number(counts.get('executions'))} executions in {counts.get('seconds')} s, "
                         f"{number(counts.get('coverageEdges'))} edges, peak RSS {counts.get('peakRSSMegabytes')} MB, exit {counts.get('exitCode')}",
                         verdict("fuzz")))
        if not fuzz:
            rows.append(("fuzzing", "not recorded", verdict("fuzz")))
    else:
        rows.append(("fuzzing", "not run (FUZZ_SECONDS=0)", "—"))

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [BEGIN,
           f"Generated by `make reliability-report` on {date}, on commit `{commit}` "
           f"(`CRASH_KILLS={arguments.kills} CRASH_SEED={arguments.seed} FUZZ_SECONDS={arguments.fuzz_seconds}`), "
           "from the JSON files the runs write. Do not edit by hand: rerun it.",
           "",
           "| campaign | count | outcome, wall time |",
           "|---|---|---|"]
    out += [f"| {campaign} | {count} | {outcome} |" for campaign, count, outcome in rows]
    out.append(END)
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swift", default="swift")
    parser.add_argument("--kills", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fuzz-seconds", type=int, default=60)
    parser.add_argument("--doc", default="Docs/reliability.md")
    arguments = parser.parse_args()

    root = pathlib.Path(git("rev-parse", "--show-toplevel"))
    os.chdir(root)
    commit = git("rev-parse", "--short=12", "HEAD") + (" + uncommitted changes" if git("status", "--porcelain", "--", "Sources", "Tests", "Package.swift") else "")
    report_directory = root / ".build" / "reliability-report"
    logs = report_directory / "logs"
    for stale in report_directory.glob("*.json"):
        stale.unlink()
    logs.mkdir(parents=True, exist_ok=True)
    environment = {"RELIABILITY_REPORT_DIR": str(report_directory)}

    outcomes = {}
    build, _ = run("build", [arguments.swift, "build", "--build-tests"], {}, logs)
    if build != 0:
        sys.exit("reliability-report: the build failed; see " + str(logs / "build.log"))
    test = [arguments.swift, "test", "--skip-build", "--filter"]
    outcomes["sweeps"] = run("sweeps", test + ["PowerLossTests|PowerCutDuringRecoveryTests"], environment, logs)
    outcomes["faults"] = run("faults", test + ["IOFaultTests"], environment, logs)
    outcomes["crashes"] = run("crashes", test + ["ProcessCrashTests"], {
        **environment, "RELIABILITY_CRASH_KILLS": str(arguments.kills), "RELIABILITY_CRASH_SEED": str(arguments.seed)}, logs)
    fuzz_file = root / "Fuzz" / ".build-fuzz" / "reliability" / "fuzz.json"
    if arguments.fuzz_seconds > 0:
        if fuzz_file.exists():
            fuzz_file.unlink()
        outcomes["fuzz"] = run("fuzz", ["Fuzz/fuzz.sh"], {"FUZZ_SECONDS": str(arguments.fuzz_seconds)}, logs)

    doc = root / arguments.doc
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"reliability-report: {doc} has no {BEGIN} … {END} block to replace")
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    doc.write_text(before + table(report_directory, fuzz_file, outcomes, arguments, commit) + after)
    print(f"reliability-report: wrote the table in {doc}")
    if any(code != 0 for code, _ in outcomes.values()):
        sys.exit("reliability-report: a campaign failed; the table says which")


if __name__ == "__main__":
    main()
