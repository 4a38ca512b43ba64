"""The GPU tables of the evidence pages, printed from the JSON records the GPU scripts wrote, so
that no GPU figure is typed by hand.

    python benchmarks/gpu/tables.py                  # the records kept in docs/evidence/data/ (DEFAULT)
    python benchmarks/gpu/tables.py OUT/profiles.json OUT/bench_seeds_ant_delayed.json ...

Reads `train.py profile` reports (alone, or merged by latency.sh into a profiles.json) and
`train.py bench-seeds` reports, skips other JSON and CPU reports, and prints one Markdown table
per kind, each row naming the card: training throughput in the format of
docs/evidence/throughput-h200.md "Training throughput" (and docs/performance.md's H200 table),
seeds in one program in the format of docs/evidence/throughput-h200.md "Seeds in one program".
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

DEFAULT = ["docs/evidence/data/throughput/h200_*.json", "docs/evidence/data/h200-*/*.json"]

TRAINER_HEADER = (
    "| profile and setting | device | env steps/s | gradient updates/s | chunk compile (s) | peak memory |\n"
    "|---|---|---|---|---|---|"
)
SEEDS_HEADER = (
    "| device, profile | seeds N | N-seed program, s per chunk | N sequential runs, s | speed-up | env steps/s (all seeds) "
    "| program footprint (MiB) | compile (s) |\n|---|---|---|---|---|---|---|---|"
)


def _rate(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def _setting(report: dict) -> str:
    train = report["config"]["train"]
    name = f"`{report['profile']}`"
    if train["num_envs"] == 1:
        return f"{name}, the paper's" + (f", {train['num_seeds']} seeds" if train.get("num_seeds", 1) > 1 else "")
    return f"{name}, {train['num_envs']} envs, {train['updates_per_step']} updates of batch {train['batch_size']} per vector step"


def trainer_row(report: dict) -> str:
    steady, memory = report["steady_state"], report["memory"]
    compile_s = report["compile_s"].get("chunk", report["compile_s"].get("train"))
    peak = f"{memory['device_peak_mib']:.0f} MiB device" if memory.get("device_peak_mib") else f"{memory['host_peak_rss_mib'] / 1024:.1f} GiB host"
    return (
        f"| {_setting(report)} | {report['device']['device_kind']} | {_rate(steady['env_steps_per_s'])} | "
        f"{steady['updates_per_s']:.0f} | {compile_s:.0f} | {peak} |"
    )


def seeds_rows(report: dict) -> list[str]:
    device = report["device"]["device_kind"]
    where = f"{device}, `{report['profile']}` paper setting ({report['chunk_env_steps']} steps, {report['updates_per_chunk']} updates/chunk)"
    return [
        f"| {where} | {row['seeds']} | {row['vmapped_seconds_per_chunk']:.3f} | {row['sequential_seconds_per_chunk']:.3f} | "
        f"{row['speedup_vs_sequential']:.2f}x | {row['vmapped_env_steps_per_s']:,.0f} | {row['program_bytes'] / 2**20:.1f} | "
        f"{row['compile_s']:.0f} |"
        for row in report["rows"]
    ]


def _reports(paths: list[str]):
    """(path, report) for every profile or bench-seeds report in `paths` (a merged profiles.json
    gives each of its reports); other JSON files are skipped."""
    for path in paths:
        data = json.loads(Path(path).read_text())
        if isinstance(data, dict) and "device" not in data and all(isinstance(v, dict) and "device" in v for v in data.values()):
            yield from ((f"{path}:{key}", value) for key, value in data.items())
        elif isinstance(data, dict) and "device" in data:
            yield path, data


def tables(paths: list[str]) -> str:
    trainer, seeds = [], []
    for _, report in _reports(paths):
        if report["device"].get("platform") == "cpu":
            continue
        if "steady_state" in report and "memory" in report:
            trainer.append(trainer_row(report))
        elif report.get("rows") and "vmapped_seconds_per_chunk" in report["rows"][0]:
            seeds.extend(seeds_rows(report))
    parts = []
    if trainer:
        parts.append("Training throughput (`train.py profile`):\n\n" + TRAINER_HEADER + "\n" + "\n".join(trainer))
    if seeds:
        parts.append("Seeds in one program (`train.py bench-seeds`):\n\n" + SEEDS_HEADER + "\n" + "\n".join(seeds))
    return "\n\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="*", help="JSON records (default: " + " ".join(DEFAULT) + ")")
    args = parser.parse_args()
    paths = args.records or sorted(p for pattern in DEFAULT for p in glob.glob(pattern))
    if not paths:
        raise SystemExit("error: no records found (" + " ".join(args.records or DEFAULT) + ")")
    print(tables(paths), end="")


if __name__ == "__main__":
    main()
