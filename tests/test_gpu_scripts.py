"""The scripts of benchmarks/gpu/, which measure on a GPU, dry-run here on the CPU at tiny sizes
through the same commands, so that none can rot between the runs that have a GPU."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _dry_run(script: str, out: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DRY_RUN": "1", "OUT": str(out), **env}
    return subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu" / script)], cwd=ROOT, env=environment, capture_output=True, text=True, check=False, timeout=1800
    )


TUNE = ROOT / "benchmarks" / "gpu" / "tune.sh"


def _tune_candidates() -> dict[str, str]:
    """tune.sh's CANDIDATES block: name -> the `train.py` options it adds, in the block's order."""
    block = re.search(r"^CANDIDATES=\((.*?)^\)", TUNE.read_text(), re.DOTALL | re.MULTILINE)
    return dict(re.findall(r'^\s*"([\w-]+)\|([^"]*)"', block.group(1), re.MULTILINE))


def _what_comes_back(out: Path) -> list[Path]:
    """The files under OUT, which the scripts keep to at most 8, 2 folders down (quick to copy back)."""
    return [path for path in out.rglob("*") if path.is_file()]


@pytest.mark.slow
@pytest.mark.heavy
def test_fast_script_dry_run_trains_reports_and_bundles(tmp_path):
    out = tmp_path / "out"
    done = _dry_run("fast.sh", out, COMMIT="0123abc", SCORES="cartpole_swingup_sparse=700", ALONE="1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    device = (out / "device.txt").read_text()
    # The commit given wins over the checkout's: a copy's .git can be stale.
    assert "jax: " in device and "device: cpu" in device and "commit: 0123abc\n" in device and "dry_run: 1" in device
    log = (out / "log.txt").read_text()
    # One task named: it gets the whole run (FIRST_SECONDS defaults to `all`), and ends on its own.
    assert "== cartpole_swingup_sparse: cartpole_swingup_sparse_fast, 2 seeds, up to " in log and ", all the run has left (" in log
    assert "cartpole_swingup_sparse: exit 0" in log and "cartpole_swingup_sparse: its own end (exit 0)" in log
    # The time-to-score table against the score given (SCORES; by default the paper's), from the run's clocks.
    (row,) = json.loads((out / "time_to_score.json").read_text())
    assert (row["task"], row["method"], row["seeds"], row["score"]) == ("cartpole_swingup_sparse", "pbac", 2, 700.0)
    assert row["final_wall_s"] > 0 and "## Time to score" in (out / "results.md").read_text()
    # One bundle holds the logs and the figures; no checkpoint travels back.
    with tarfile.open(out / "fast_runs.tgz") as bundle:
        names = bundle.getnames()
        evaluations = bundle.extractfile("runs/cartpole_swingup_sparse/eval.jsonl").read().decode().splitlines()
    assert "report/curves_wall_cartpole_swingup_sparse.png" in names and not any("checkpoints" in n for n in names)
    assert all("wall_s" in json.loads(line) and "train_s" in json.loads(line) for line in evaluations)
    returned = _what_comes_back(out)
    assert len(returned) <= 8 and all(len(path.relative_to(out).parts) <= 3 for path in returned), returned


# Each device script's dry run: what it must leave in $OUT (besides device.txt and log.txt).
DRY_RUNS = {
    "trainer.sh": ["profile_ant_delayed_paper.json", "profile_ant_delayed_n4096.json", "profile_ant_delayed_n256.json"],
    "seeds.sh": ["bench_seeds_ant_delayed.json", "bench_seeds_reacher_hard.json"],
    "reacher_table.sh": ["table.json", "summary.json", "results.md", "time_to_score.json", "reacher_table.tgz"],
    "latency.sh": ["profiles.json"],
    "env.sh": ["bench_ant.json", "bench_humanoid.json", "bench_hopper.json", "bench_ant_euler.json"],
    "metaworld.sh": ["metaworld.json"],
    "device_tests.sh": ["pytest.txt", "junit.xml"],
    "tune.sh": ["results.md", "time_to_score.json", "candidates.json", "tune_runs.tgz"],
}


def test_every_device_script_has_a_dry_run_test():
    scripts = {path.name for path in (ROOT / "benchmarks" / "gpu").glob("*.sh")} - {"setup.sh", "wheels.sh", "cache.sh"}
    assert scripts == set(DRY_RUNS) | {"fast.sh"}, scripts


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("script", list(DRY_RUNS))
def test_device_script_dry_run(script, tmp_path):
    out = tmp_path / "out"
    table = {"TABLE": str(tmp_path / "table")} if script == "reacher_table.sh" else {}
    done = _dry_run(script, out, **table)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    device = (out / "device.txt").read_text()
    assert "jax: " in device and "device: cpu" in device and "commit: " in device and "dry_run: 1" in device
    log = (out / "log.txt").read_text()
    exits = [line for line in log.splitlines() if ": exit " in line]
    assert exits and all(line.endswith(": exit 0") for line in exits), exits  # none cut by its bound, none failed
    assert "skipped" not in log, log
    for name in DRY_RUNS[script]:
        assert (out / name).stat().st_size > 0, name
    returned = _what_comes_back(out)
    assert len(returned) <= 8 and all(len(path.relative_to(out).parts) <= 3 for path in returned), returned
    if script == "latency.sh":
        rows = json.loads((out / "profiles.json").read_text())
        assert set(rows) == {"reacher_1", "reacher_10", "reacher_10_cmdbuf", "reacher_10_tf32", "cartpole_10", "ant_delayed_1", "ant_delayed_10"}
        assert rows["reacher_1"]["baseline"]["steady_state"]["env_steps_per_s"] > 0  # the before/after pair
        # Every task is the chain probe in a dry run, cartpole where a --baseline sets solver
        # options: a line that is an earlier one word for word runs once.
        for line, first in (("ant_delayed_1", "reacher_1"), ("cartpole_10", "reacher_10"), ("ant_delayed_10", "reacher_10_cmdbuf")):
            assert f"{line}: the same command as {first} in this dry run" in log, log
        assert len(exits) == 4, exits
    if script == "trainer.sh":
        # The chain probe stands in, and the dry run's sizes override each line's: the three lines
        # parse alike (benchmarks/gpu/resolved.py), so one runs.
        for line in ("ant_delayed_n4096", "ant_delayed_n256"):
            assert f"{line}: the same command as ant_delayed_paper in this dry run" in log, log
        assert exits == ["ant_delayed_paper: exit 0"], exits
    if script == "env.sh":
        # Every robot is Hopper at the dry run's sizes: Ant, Humanoid and Hopper parse alike; the
        # Euler integrator is a setting of its own.
        for line in ("env_humanoid", "env_hopper"):
            assert f"{line}: the same command as env_ant in this dry run" in log, log
        assert exits == ["env_ant: exit 0", "env_ant_euler: exit 0"], exits
    if script == "seeds.sh":
        assert "seeds_reacher_hard: the same command as seeds_ant_delayed in this dry run" in log and len(exits) == 1, log
    if script == "metaworld.sh":
        assert set(json.loads((out / "metaworld.json").read_text())) == {"mw_reach_ours", "mw_reach_no_barriers"}
    if script == "reacher_table.sh":
        # What rebuilds the report here: the run's config and logs, and its report, finished or not.
        with tarfile.open(out / "reacher_table.tgz") as bundle:
            names = bundle.getnames()
        run = "runs/pbac_cartpole_swingup_sparse"
        assert {f"{run}/config.json", f"{run}/eval.jsonl", f"{run}/summary.json", "call_report/results.md"} <= set(names), names
        assert not any("checkpoints" in n for n in names)
        rows = json.loads((out / "time_to_score.json").read_text())
        assert [(row["method"], row["seeds"], row["score"]) for row in rows] == [("pbac", 2, 706.5), ("pbac", 2, 785.0)], rows
        # Run again on the same TABLE, it continues the table (here finished: skipped, reported again).
        again = _dry_run(script, tmp_path / "again", **table)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        log = (tmp_path / "again" / "log.txt").read_text()
        assert "continuing the table in " in log and "pbac_cartpole_swingup_sparse: finished" in log, log
        assert "finished earlier, skipped" in log and "reacher_table: exit 0" in log, log
        assert (tmp_path / "again" / "results.md").stat().st_size > 0
    if script == "tune.sh":
        # Every candidate of the block trained (two waves of two side by side) and is a column of its
        # own (the report's --by-run), at 90 % and 100 % of the score, with a row in the standing.
        options = _tune_candidates()
        candidates = list(options)
        assert len(candidates) == 4 and candidates[0] == "base" and options["base"] == ""
        assert "4 candidate(s) of cartpole_swingup_sparse, 2 seeds each, 2 at a time" in log
        assert sorted(exits) == sorted(f"{name}: exit 0" for name in candidates), exits
        rows = json.loads((out / "time_to_score.json").read_text())
        assert sorted((row["method"], row["score"]) for row in rows) == sorted((f"{n}/pbac", s) for n in candidates for s in (706.5, 785.0))
        records = json.loads((out / "candidates.json").read_text())
        assert {name: (record["state"], record["exit"]) for name, record in records.items()} == dict.fromkeys(candidates, ("ended", 0))
        assert {name: record["options"] for name, record in records.items()} == options
        results = (out / "results.md").read_text()
        standing = results.split("# Results")[0].splitlines()
        assert results.startswith("# Tuning: standing") and sum(line.startswith("| ") and "/pbac | " in line for line in standing) == 4, results
        rows = [line.split(" | ") for line in standing if "/pbac | " in line]
        assert all(row[5].endswith(" s") and float(row[5][:-2]) > 0 for row in rows), standing  # compile seconds
        assert "| Task | " + " | ".join(f"{name}/pbac" for name in sorted(candidates)) + " |" in results
        with tarfile.open(out / "tune_runs.tgz") as bundle:
            names = bundle.getnames()
        assert {f"runs/{name}/eval.jsonl" for name in candidates} <= set(names) and not any("checkpoints" in n for n in names)
        assert "report/curves_wall_cartpole_swingup_sparse.png" in names
        # Each evaluation written when made, a stop at once and chunks run whole: nothing of a
        # candidate waits for a stop's grace, which killed three runs before their kept evaluations,
        # and no split chunk compiles while it trains (docs/evidence/h200-20261129.md).
        with tarfile.open(out / "tune_runs.tgz") as bundle:
            config = json.load(bundle.extractfile("runs/base/config.json"))
        train = config["config"]["train"]
        assert (train["eval_batch"], train["stop_grace_seconds"], train["chunk_seconds"]) == (1, 0.0, 0.0), train
    if script == "device_tests.sh":
        from mjx_pbac import algos

        # PBAC's chunk test, every other algorithm's, and the five others, each named by its node id.
        assert f"{len(algos.NAMES) + 5} tests collected" in (out / "pytest.txt").read_text()


def test_a_dry_run_key_is_what_a_line_parses_to():
    """benchmarks/gpu/resolved.py: two lines whose later options override their earlier ones alike
    resolve alike (however their --out differs); a line that differs resolves apart; a misspelt
    option is the command's own one-line error, as on the GPU."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("resolved", ROOT / "benchmarks" / "gpu" / "resolved.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tiny = ["--num-envs", "2", "--steps-per-call", "5"]
    ant = module.resolved(["bench-env", "--env", "hopper", "--out", "a.json", "--num-envs", "1", "256", "16384", *tiny])
    humanoid = module.resolved(["bench-env", "--env", "hopper", "--out", "b.json", "--num-envs", "256", "8192", *tiny])
    euler = module.resolved(["bench-env", "--env", "hopper", "--out", "c.json", *tiny, "--set", "integrator=euler"])
    assert ant == humanoid != euler and "num_envs=(2,)" in ant and "a.json" not in ant
    with pytest.raises(SystemExit):
        module.resolved(["bench-env", "--env", "hopper", "--num-env", "2"])
    with pytest.raises(SystemExit, match="not a command that takes sizes"):
        module.resolved(["bench-envs", "--env", "hopper"])


RECORDED_RUN = ROOT / "docs" / "evidence" / "data" / "h200-20261128" / "runs" / "reacher_fast_cpu"
"""A run on file (5 reacher_hard seeds, its logs without checkpoints), for the report's tests."""


def test_report_computes_on_the_cpu_and_joins_no_job(tmp_path):
    """`train.py report` runs beside a training run on the same GPU (the device scripts' copier
    loop), so it must not load the GPU backend (JAX claims 75 % of the GPU's memory at its first
    array). In a fresh process whose environment asks JAX for CUDA (which this machine has not:
    loading it would fail) and says it is one of a SLURM job's 2 tasks (joining would fail with no
    coordinator), the report finishes, and afterwards JAX's platform is the CPU alone."""
    probe = (
        "import json, sys, jax, train\n"
        "code = train.run(['report', sys.argv[1], '--out', sys.argv[2]])\n"
        "print(json.dumps({'code': code, 'platforms': jax.config.jax_platforms, 'devices': sorted({d.platform for d in jax.devices()})}))\n"
    )
    environment = {**os.environ, "JAX_PLATFORMS": "cuda", "SLURM_NTASKS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(RECORDED_RUN), str(tmp_path / "report")],
        cwd=ROOT, env=environment, capture_output=True, text=True, check=False, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"code": 0, "platforms": "cpu", "devices": ["cpu"]}, seen
    assert (tmp_path / "report" / "time_to_score.json").is_file()


def test_report_by_run_compares_runs_of_one_task_and_algorithm(tmp_path):
    """tune.sh's candidates are runs of the same task and algorithm with other options, whose
    members carry the same label ("pbac") and seeds: the report refuses them as seeds of one
    method (saying which option helps), and `--by-run True` reports one method per run directory."""
    from mjx_pbac.commands import report

    runs = []
    for name in ("base", "u8"):
        shutil.copytree(RECORDED_RUN, tmp_path / name)
        runs.append(str(tmp_path / name))
    with pytest.raises(SystemExit, match=r"same seed appears twice .*--by-run True"):
        report.main([*runs, "--out", str(tmp_path / "merged")])
    report.main([*runs, "--out", str(tmp_path / "report"), "--by-run", "True", "--score-fraction", "0.9", "1.0"])
    rows = json.loads((tmp_path / "report" / "time_to_score.json").read_text())
    assert [(row["method"], row["seeds"]) for row in rows] == [("base/pbac", 5)] * 2 + [("u8/pbac", 5)] * 2, rows
    assert "| Task | base/pbac | u8/pbac |" in (tmp_path / "report" / "results.md").read_text()


def test_tune_candidates_resolve_at_the_profiles_own_sizes():
    """The dry run appends tiny sizes after each candidate's options, so it checks their spelling
    only; here each candidate resolves at the GPU sizes it will run at (the script's default
    profile, 10 seeds), with its schedule, and each differs from the profile and from the others."""
    from mjx_pbac import cli
    from mjx_pbac.commands import _common
    from mjx_pbac.schedule import Schedule

    profile = re.search(r'^PROFILE=\$\(dry "\$\{PROFILE:-([\w-]+)\}"\)', TUNE.read_text(), re.MULTILINE).group(1)
    resolved = {}
    for name, options in _tune_candidates().items():
        config = cli.configure(_common.load(profile, None), ["--seeds", "10", *options.split()], f"tune.sh {name}")
        Schedule.of(config.train)
        resolved[name] = repr(config)
    assert len(set(resolved.values())) == len(resolved) >= 2, sorted(resolved)
    # The usage lines name candidates the block has (a stale name is an error when the script runs).
    named = {n for only in re.findall(r'ONLY="([^"]*)"', TUNE.read_text().split("CANDIDATES=(")[0]) for n in only.split()}
    assert named and named <= set(resolved), (named, sorted(resolved))


def test_the_gpu_tables_script_reproduces_the_docs_gpu_rows_from_the_records():
    """Every H200 row that benchmarks/gpu/tables.py prints from the records, by default (its DEFAULT
    globs), appears word for word in the H200 evidence page or in docs/performance.md."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_tables", ROOT / "benchmarks" / "gpu" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    records = sorted(str(path) for pattern in module.DEFAULT for path in ROOT.glob(pattern))
    assert any("/throughput/" in path for path in records) and any("/h200-" in path for path in records), records
    printed = module.tables(records)
    rows = [line for line in printed.splitlines() if line.startswith("| ") and "NVIDIA H200" in line]
    # Three trainer settings and three seed counts at 8f8879a, the paper setting again at 8c31d85.
    assert len(rows) == 7, printed
    pages = "".join((ROOT / "docs" / page).read_text() for page in ("evidence/throughput-h200.md", "performance.md")).replace("**", "")
    for row in rows:
        assert row in pages, row


def test_the_compilation_cache_comes_back_when_it_fits_and_is_restored_as_it_was(tmp_path):
    """benchmarks/gpu/cache.sh: `save` packs the cache into OUT when the bundle fits what OUT is kept
    to (its size, and fewer than 8 files in OUT), else leaves it behind and says why;
    `restore` unpacks an earlier run's bundle into an empty cache, or says there is none."""
    script = ROOT / "benchmarks" / "gpu" / "cache.sh"
    cache, out, again = tmp_path / "cache", tmp_path / "out", tmp_path / "again"
    (cache / "sub").mkdir(parents=True)
    (cache / "jit_train-abc").write_bytes(os.urandom(3000))
    (cache / "sub" / "jit_eval-def").write_bytes(os.urandom(5000))
    out.mkdir()

    def run(*args, **env):
        done = subprocess.run(["bash", str(script), *map(str, args)], check=False, capture_output=True, text=True, env={**os.environ, **env})
        assert done.returncode == 0, done.stderr
        return done.stdout

    bundle = {"CACHE_BUNDLE": str(out / "jax_cache.tgz")}
    assert "no bundle" in run("restore", again, **bundle)
    assert "2 entries" in run("save", cache, out) and (out / "jax_cache.tgz").exists()
    assert "restored 2 entries" in run("restore", again, **bundle)
    assert (again / "jit_train-abc").read_bytes() == (cache / "jit_train-abc").read_bytes()
    assert (again / "sub" / "jit_eval-def").read_bytes() == (cache / "sub" / "jit_eval-def").read_bytes()
    (out / "jax_cache.tgz").unlink()
    assert "packed: over the" in run("save", cache, out, CACHE_MAX_BYTES="7000") and not any(out.iterdir())
    assert "more than 4x" in run("save", cache, out, CACHE_MAX_BYTES="1000") and not any(out.iterdir())
    for i in range(8):
        (out / f"result_{i}.json").write_text("{}")
    assert "already holds 8 files" in run("save", cache, out) and not (out / "jax_cache.tgz").exists()


def test_slim_wheels_hold_every_model_file_the_envs_load(tmp_path):
    """wheels.sh's slim dm-control and metaworld wheels: each an installable wheel of the
    installed version, a few MB, from which the envs load their models (DM Control's cartpole, with
    its common includes) and Meta-World's files pass the pinned sha256 manifest."""
    import zipfile

    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu" / "slim_wheels.py"), str(tmp_path / "whl")],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    wheels = sorted((tmp_path / "whl").glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["dm_control", "metaworld"], wheels
    assert all(w.stat().st_size < 5_000_000 for w in wheels), [(w.name, w.stat().st_size) for w in wheels]
    site = tmp_path / "site"
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            assert any(name.endswith(".dist-info/RECORD") for name in archive.namelist())
            archive.extractall(site)
    check = (
        "import sys; from envs import dm_control, metaworld_model as m; "
        f"assert dm_control.dm_control_suite_dir().startswith({str(site)!r}) and m.asset_dir().startswith({str(site)!r}); "
        "model = dm_control.load_suite_model('cartpole.xml'); m.verify_assets(); print(model.nbody, len(m.read_manifest()))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"},
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.split() == ["3", "63"]  # world, cart, pole; the manifest's files, loaded.stdout
