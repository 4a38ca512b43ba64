"""Where a test suite's time goes in XLA: sums a compile log ($MJX_PBAC_COMPILE_LOG, written by
`mjx_pbac.compilation_cache`) by test file, and lists the programs compiled more than once.

    MJX_PBAC_COMPILE_LOG=/tmp/compiles.jsonl pytest -q        # every process appends to the file
    python benchmarks/compile_log.py /tmp/compiles.jsonl [--top 25] [--durations pytest.log]

Per test file: its tests' seconds as pytest timed them (with --durations: the output of a
`pytest --durations=0` run, the same run), seconds of Python tracing, of lowering, of XLA compiles that missed the persistent
cache, and of cache reads (hits), with their counts. Then the cache keys compiled (missed) more
than once, which the cache should have served (a compile under its 1 s threshold is not kept),
and the programs by name whose compiles cost most in all, with how many distinct keys (shapes or
settings) each name had: a name with many keys is a program the tests build at many sizes.
"""

from __future__ import annotations

import argparse
import collections
import json
import re


def load(path: str) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def test_seconds(pytest_output: str) -> dict[str, float]:
    """Each test file's seconds (setup, call and teardown summed) from `pytest --durations=0` output."""
    seconds: dict[str, float] = collections.Counter()
    for match in re.finditer(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S+?)::", pytest_output, re.MULTILINE):
        seconds[match.group(2)] += float(match.group(1))
    return dict(seconds)


def summarise(rows: list[dict], top: int = 25, durations: dict[str, float] | None = None) -> str:
    per_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    misses_by_key: dict[str, list[dict]] = collections.defaultdict(list)
    by_name: dict[str, dict] = collections.defaultdict(lambda: {"seconds": 0.0, "keys": set(), "tests": set()})
    for row in rows:
        test_file = row["test"].split("::")[0] or "(outside pytest)"
        counts = per_file[test_file]
        kind = row["kind"] if row["kind"] != "compile" else f"compile_{row.get('cache', 'off')}"
        counts[kind] += row["seconds"]
        counts[f"{kind}_n"] += 1
        if kind in ("compile_miss", "compile_off"):
            if row.get("key"):
                misses_by_key[row["key"]].append(row)
            entry = by_name[row["fun"]]
            entry["seconds"] += row["seconds"]
            entry["keys"].add(row.get("key"))
            entry["tests"].add(row["test"])
    timed = durations is not None
    durations = durations or {}
    lines = ["| test file |" + (" test s |" if timed else "") + " trace s | lower s | compile s (n) | cache reads s (n) |",
             "|---|" + ("---:|" if timed else "") + "---:|---:|---:|---:|"]
    order = sorted(per_file.items(), key=lambda item: -(item[1]["trace"] + item[1]["lower"] + item[1]["compile_miss"] + item[1]["compile_off"] + item[1]["compile_hit"]))
    total = collections.Counter()
    for test_file, counts in order:
        total.update(counts)
        compiled = counts["compile_miss"] + counts["compile_off"]
        wall = f" {durations.get(test_file, 0.0):.1f} |" if timed else ""
        lines.append(
            f"| {test_file} |{wall} {counts['trace']:.1f} | {counts['lower']:.1f} | {compiled:.1f} ({counts['compile_miss_n'] + counts['compile_off_n']}) "
            f"| {counts['compile_hit']:.1f} ({counts['compile_hit_n']}) |"
        )
    wall = f" {sum(durations.values()):.1f} |" if timed else ""
    lines.append(
        f"| all |{wall} {total['trace']:.1f} | {total['lower']:.1f} | {total['compile_miss'] + total['compile_off']:.1f} "
        f"({total['compile_miss_n'] + total['compile_off_n']}) | {total['compile_hit']:.1f} ({total['compile_hit_n']}) |"
    )
    repeated = sorted(((sum(r["seconds"] for r in group), key, group) for key, group in misses_by_key.items() if len(group) > 1), reverse=True)
    lines += ["", f"Cache keys compiled more than once: {len(repeated)}, {sum(s for s, _, _ in repeated):.1f} s in all"]
    for seconds, key, group in repeated[:top]:
        tests = sorted({r["test"] or "(outside pytest)" for r in group})
        lines.append(f"- {seconds:.1f} s, {len(group)}x {key[:60]}: {', '.join(tests[:3])}{' ...' if len(tests) > 3 else ''}")
    lines += ["", "Programs by compile seconds (missed or uncached), with their distinct keys and tests:"]
    for name, entry in sorted(by_name.items(), key=lambda item: -item[1]["seconds"])[:top]:
        lines.append(f"- {entry['seconds']:.1f} s {name}: {len(entry['keys'])} keys, {len(entry['tests'])} tests")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="the JSON-lines file $MJX_PBAC_COMPILE_LOG named")
    parser.add_argument("--durations", help="the output of the same `pytest --durations=0` run, for each file's test seconds")
    parser.add_argument("--top", type=int, default=25, help="how many repeated keys and programs to list")
    args = parser.parse_args(argv)
    try:
        rows = load(args.log)
    except FileNotFoundError:
        raise SystemExit(f"error: no compile log at {args.log}; run with MJX_PBAC_COMPILE_LOG={args.log} set first") from None
    except json.JSONDecodeError as error:
        raise SystemExit(f"error: {args.log} is not a compile log (JSON lines): {error}") from None
    durations = None
    if args.durations:
        try:
            with open(args.durations) as handle:
                durations = test_seconds(handle.read())
        except FileNotFoundError:
            raise SystemExit(f"error: no pytest output at {args.durations}") from None
    print(summarise(rows, args.top, durations))


if __name__ == "__main__":
    main()
