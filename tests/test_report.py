"""mjx_pbac.report on synthetic run directories written in the runner's on-disk format."""

import json
import shutil
from pathlib import Path

import matplotlib.colors
import matplotlib.figure
import matplotlib.image
import numpy as np
import pytest
from PIL import Image

from mjx_pbac import report, stats

STEPS = [0, 10_000, 20_000, 30_000]
SHAPE = np.array([0.0, 1.0, 2.0, 3.0]) / 3  # every seed's curve is final * SHAPE, so AULC = final / 2

# Final rewards per seed 0..4, chosen so the IQMs and t-tests are easy by hand (see test below).
ANT_PBAC = [30.0, 60.0, 90.0, 120.0, 150.0]
ANT_SAC = [20.0, 50.0, 85.0, 100.0, 140.0]
HOPPER_PBAC = [100.0, 200.0, 300.0, 400.0, 500.0]
HOPPER_SWEEP = [110.0, 190.0, 310.0, 390.0, 505.0]
SWEEP = "pbac bootstrap_rate=0.01"


def write_run(
    run_dir: Path,
    task: str,
    algorithm: str,
    finals: dict[str, list[float]],
    steps=STEPS,
    seeds=None,
    status: str | None = "finished",
    visits: bool = False,
) -> Path:
    """A run directory: members per label (seeds 0.. in order), eval.jsonl with curves final * SHAPE."""
    run_dir.mkdir(parents=True)
    members, records = [], []
    for label, values in finals.items():
        for position, final in enumerate(values):
            seed = position if seeds is None else seeds[position]
            overrides = {"pbac.bootstrap_rate": 0.01} if "=" in label else {}
            index = len(members)
            members.append({"index": index, "seed": seed, "label": label, "overrides": overrides})
            curve = final * np.linspace(0.0, 1.0, len(steps))
            for env_steps, value in zip(steps, curve):
                records.append(
                    {
                        "env_steps": env_steps,
                        "member": index,
                        "seed": seed,
                        "label": label,
                        "return_mean": float(value),
                        "return_std": 1.0,
                        "length_mean": 1000.0,
                        "returns": [float(value)] * 10,
                        "lengths": [1000] * 10,
                    }
                )
    config = {
        "profile": "test",
        "algorithm": algorithm,
        "config": {"train": {"env": task}, "pbac": {}},
        "members": members,
    }
    (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    (run_dir / "eval.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    if status is not None:
        (run_dir / "summary.json").write_text(json.dumps({"status": status, "message": ""}))
    if visits:
        write_visits(run_dir, members)
    return run_dir


def write_visits(run_dir: Path, members: list[dict], total: int = 50_000) -> None:
    lines = []
    for env_steps in range(500, total + 1, 500):
        for member in members:
            angle = env_steps / total * 6.0 + member["index"]
            radius = env_steps / total * 10.0
            state = {"x_position": radius * np.cos(angle), "y_position": radius * np.sin(angle), "z_position": 0.5}
            record = {
                "env_steps": env_steps,
                "member": member["index"],
                "seed": member["seed"],
                "label": member["label"],
                "state": state,
            }
            lines.append(json.dumps(record) + "\n")
    (run_dir / "visits.jsonl").write_text("".join(lines))


@pytest.fixture
def runs(tmp_path):
    return [
        write_run(tmp_path / "ant_pbac", "ant_delayed", "pbac", {"pbac": ANT_PBAC}, visits=True),
        write_run(tmp_path / "ant_sac", "ant_delayed", "sac", {"sac": ANT_SAC}),
        write_run(tmp_path / "hopper_sweep", "hopper_delayed", "pbac", {"pbac": HOPPER_PBAC, SWEEP: HOPPER_SWEEP}),
    ]


def markdown_rows(markdown: str, title: str) -> dict[str, list[str]]:
    """Task -> cells of the table under the heading `title`."""
    section = markdown.split(f"## {title}")[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| Task"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
    return rows


# -------------------------------------------------------------------------------- loading


def test_load_runs_collects_curves_per_task_and_method(runs):
    curves = report.load_runs(runs)
    assert curves.tasks == ("ant_delayed", "hopper_delayed")
    assert curves.methods == ("pbac", "sac", SWEEP)
    assert set(curves.entries) == {
        ("ant_delayed", "pbac"),
        ("ant_delayed", "sac"),
        ("hopper_delayed", "pbac"),
        ("hopper_delayed", SWEEP),
    }
    entry = curves.get("ant_delayed", "sac")
    assert entry.seeds == (0, 1, 2, 3, 4)
    np.testing.assert_array_equal(entry.env_steps, STEPS)
    assert entry.returns.shape == (5, 4)
    np.testing.assert_allclose(entry.returns[2], [0.0, 85 / 3, 170 / 3, 85.0])
    assert entry.final_rewards() == dict(enumerate(ANT_SAC))
    # AULC of final * [0, 1/3, 2/3, 1] is final * 2 / 4 = final / 2.
    assert list(entry.aulcs().values()) == pytest.approx([value / 2 for value in ANT_SAC])
    assert curves.notes == ()


# --------------------------------------------------------------------------------- tables


def test_tables_hold_the_iqm_of_the_hand_known_values(runs):
    markdown, _ = report.results_tables(report.load_runs(runs))
    final = markdown_rows(markdown, "(a) Final episode reward")
    area = markdown_rows(markdown, "(b) Area under learning curve")
    # ant pbac final [30, 60, 90, 120, 150]: q25 = 60, q75 = 120, IQM mean(60, 90, 120) = 90.
    # ant sac [20, 50, 85, 100, 140]: q25 = 50, q75 = 100, IQM (50 + 85 + 100) / 3 = 78.3.
    # Paired differences pbac - sac [10, 10, 5, 20, 10]: t = 4.49, p = 0.0054 -> sac not bold.
    assert final["ant_delayed"] == ["**90 [60, 120]**", "78 [50, 100]", "-"]
    # AULC = final / 2: pbac 45 [30, 60]; sac [10, 25, 42.5, 50, 70] -> (25 + 42.5 + 50) / 3 = 39.2.
    assert area["ant_delayed"] == ["**45.0 [30.0, 60.0]**", "39.2 [25.0, 50.0]", "-"]
    # hopper pbac IQM 300 [200, 400]; sweep [110, 190, 310, 390, 505] -> (190 + 310 + 390) / 3 = 296.7;
    # differences pbac - sweep [-10, 10, -10, 10, -5] have mean -1 < 0: p > 0.5, both bold.
    assert final["hopper_delayed"] == ["**300 [200, 400]**", "-", "**297 [190, 390]**"]
    assert area["hopper_delayed"] == ["**150 [100, 200]**", "-", "**148 [95, 195]**"]
    # The same numbers straight from stats.iqm.
    assert final["ant_delayed"][1] == report.format_cell(stats.iqm(ANT_SAC))
    assert stats.iqm(ANT_SAC) == pytest.approx((235 / 3, 50.0, 100.0))
    assert area["hopper_delayed"][2] == "**" + report.format_cell(stats.iqm(np.array(HOPPER_SWEEP) / 2)) + "**"
    assert "IQM over 5 seeds" in markdown


def test_the_papers_values_follow_each_table_for_its_methods(runs):
    markdown, _ = report.results_tables(report.load_runs(runs))
    final = markdown_rows(markdown, "(a) Final episode reward: the paper")
    area = markdown_rows(markdown, "(b) Area under learning curve: the paper")
    # paper Table 1: ant_delayed PBAC final 5138 [4770, 5457], AULC 3732 [3519, 4000]; SAC and
    # the sweep's label are not among its columns
    assert final["ant_delayed"] == ["5138 [4770, 5457]", "-", "-"]
    assert final["hopper_delayed"] == ["775 [722, 910]", "-", "-"]
    assert area["ant_delayed"] == ["3732 [3519, 4000]", "-", "-"]
    # ours stay where they were, the paper's come after them
    assert markdown.index("## (a) Final episode reward\n") < markdown.index("## (a) Final episode reward: the paper")


def test_markdown_and_latex_structure(runs):
    markdown, latex = report.results_tables(report.load_runs(runs))
    header = f"| Task | pbac | sac | {SWEEP} |"
    assert markdown.count(header) == 4  # ours and the paper's, for (a) and (b)
    assert markdown.count("|---|---|---|---|") == 4
    assert latex.count("\\begin{table}") == latex.count("\\end{table}") == 2
    assert latex.count("\\begin{tabular}{lccc}") == 2
    assert latex.count("\\toprule") == latex.count("\\midrule") == latex.count("\\bottomrule") == 2
    assert "    Task & pbac & sac & pbac bootstrap\\_rate=0.01 \\\\" in latex
    assert "    ant\\_delayed & \\textbf{90 [60, 120]} & 78 [50, 100] & - \\\\" in latex
    assert "    hopper\\_delayed & \\textbf{150 [100, 200]} & - & \\textbf{148 [95, 195]} \\\\" in latex
    assert "5 seeds" in latex and "25\\%" in latex
    # Every table row has one cell per column.
    for line in latex.splitlines():
        if line.endswith("\\\\"):
            assert line.count(" & ") == 3, line


def test_seed_caption_names_cells_with_fewer_seeds(tmp_path, runs):
    extra = write_run(tmp_path / "hopper_sac", "hopper_delayed", "sac", {"sac": [1.0, 2.0, 3.0]})
    markdown, _ = report.results_tables(report.load_runs(runs + [extra]))
    assert "IQM over up to 5 seeds (fewer in hopper_delayed/sac: 3)" in markdown


def test_unfinished_runs_are_included_with_a_note(tmp_path, runs):
    shutil.rmtree(runs[1])
    write_run(runs[1], "ant_delayed", "sac", {"sac": ANT_SAC}, status="interrupted")
    (runs[2] / "summary.json").unlink()
    curves = report.load_runs(runs)
    assert ("ant_delayed", "sac") in curves.entries
    markdown, latex = report.results_tables(curves)
    assert f"- Note: {runs[1]} is interrupted, not finished" in markdown
    assert f"- Note: {runs[2]} has no summary.json" in markdown
    assert f"% Note: {runs[1]} is interrupted" in latex


# --------------------------------------------------------------------------------- errors


def test_refuses_directories_that_are_not_runs(tmp_path, runs):
    (runs[1] / "eval.jsonl").unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError) as error:
        report.load_runs(runs + [empty])
    message = str(error.value)
    assert f"{runs[1]} has no eval.jsonl" in message
    assert f"{empty} has no config.json" in message and f"{empty} has no eval.jsonl" in message


def test_a_run_kept_compressed_reads_as_the_plain_one(tmp_path, runs):
    """Evidence keeps its runs' logs gzip-compressed: a run whose eval.jsonl and visits.jsonl are
    replaced by their .gz archives gives the same curves, and its exploration figure is drawn."""
    import gzip

    plain = report.load_runs(runs).get("ant_delayed", "pbac")
    for name in ("eval.jsonl", "visits.jsonl"):
        path = runs[0] / name
        (runs[0] / f"{name}.gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    kept = report.load_runs(runs).get("ant_delayed", "pbac")
    assert np.array_equal(kept.env_steps, plain.env_steps) and np.array_equal(kept.returns, plain.returns)
    assert kept.returns.shape == (5, 4) and kept.returns.any()  # five seeds, four evaluation points
    assert report.plot_exploration(runs[0], tmp_path / "x.png", "x_position", "y_position").is_file()


def test_refuses_the_same_seed_twice(tmp_path, runs):
    copy = write_run(tmp_path / "ant_sac_again", "ant_delayed", "sac", {"sac": [1.0, 2.0]}, seeds=[5, 3])
    with pytest.raises(ValueError, match="same seed") as error:
        report.load_runs(runs + [copy])
    assert f"(ant_delayed, sac, seed 3) comes from both {runs[1]} (member 3) and {copy} (member 1)" in str(error.value)
    # Other seeds of the same method from another run are fine.
    more = write_run(tmp_path / "ant_sac_more", "ant_delayed", "sac", {"sac": [1.0, 2.0]}, seeds=[5, 6])
    assert report.load_runs(runs + [more]).get("ant_delayed", "sac").seeds == (0, 1, 2, 3, 4, 5, 6)


def test_refuses_seeds_with_different_evaluation_points(tmp_path, runs):
    short = write_run(tmp_path / "ant_sac_short", "ant_delayed", "sac", {"sac": [1.0]}, steps=STEPS[:3], seeds=[9])
    with pytest.raises(ValueError, match="ant_delayed / sac: seeds have different evaluation points") as error:
        report.load_runs(runs + [short])
    message = str(error.value)
    assert f"seed 0 ({runs[1]}) has 4 points, 0..30000" in message
    assert f"seed 9 ({short}) has 3 points, 0..20000; lacks [30000]" in message


# -------------------------------------------------------------------------------- figures


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def coloured(image: np.ndarray) -> np.ndarray:
    """Pixels with a saturated colour (lines, bands, markers), not black, grey or white."""
    rgb = image[..., :3]
    return (rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.25


def test_plot_curves_writes_one_png_per_task(tmp_path, runs):
    paths = report.plot_curves(report.load_runs(runs), tmp_path / "figures")
    assert [path.name for path in paths] == ["curves_ant_delayed.png", "curves_hopper_delayed.png"]
    for path in paths:
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
        for colour in ("C0", "C1"):  # each method's IQM line, in its colour
            rgb = np.array(matplotlib.colors.to_rgb(colour))
            assert (np.abs(image[..., :3] - rgb).max(axis=-1) < 0.05).sum() > 100


def test_a_legend_of_many_methods_goes_under_the_axes_and_no_two_lines_look_alike(tmp_path, monkeypatch):
    """Eleven methods and a score line do not fit inside the axes without hiding curves: the legend
    goes under them and the figure grows to hold it; a figure of few methods keeps its size. Past
    matplotlib's ten colours the lines change style, so every method's line is its own."""
    drawn = []
    save = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda figure, *a, **k: (drawn.append(figure), save(figure, *a, **k))[1])
    many = [write_run(tmp_path / f"v{index:02d}", "hopper_delayed", "pbac", {"pbac": HOPPER_PBAC}) for index in range(11)]
    (crowded,) = report.plot_curves(report.load_runs(many, by_run=True), tmp_path / "many", scores={"hopper_delayed": (775.0,)})
    (sparse,) = report.plot_curves(report.load_runs(many[:2], by_run=True), tmp_path / "few")
    tall, short = matplotlib.image.imread(crowded), matplotlib.image.imread(sparse)
    assert short.shape[0] == round(report.figures.CURVES_SIZE[1] * 110) and tall.shape[0] > short.shape[0]
    under = tall[-(tall.shape[0] - short.shape[0]) - 40 :, :, :3]  # the band the figure grew by, and a margin
    for index in range(10):  # every colour's legend line is in it
        rgb = np.array(matplotlib.colors.to_rgb(f"C{index}"))
        assert (np.abs(under - rgb).max(axis=-1) < 0.05).sum() > 20, f"C{index}"
    lines = [line for line in drawn[0].axes[0].lines if "seeds" in line.get_label()]
    looks = {(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in lines}
    assert len(lines) == len(looks) == 11 and not drawn[0].axes[0].get_legend() and drawn[1].axes[0].get_legend()


def test_plot_exploration_one_panel_per_phase(tmp_path, runs):
    path = report.plot_exploration(runs[0], tmp_path / "exploration.png", "x_position", "y_position", phases=5)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    # Five panels side by side, each with scatter points (the legend sits below them).
    panels = coloured(image[int(0.1 * height) : int(0.75 * height)])
    for column in np.array_split(np.arange(width), 5):
        assert panels[:, column].sum() > 20
    # One member only, and position against time (the chain's 1-D view).
    single = report.plot_exploration(runs[0], tmp_path / "one.png", "x_position", "env_steps", phases=3, member=2)
    assert single.read_bytes()[:8] == PNG_SIGNATURE


def test_plot_exploration_errors(tmp_path, runs):
    with pytest.raises(ValueError, match=r"unknown key 'height'.*available: env_steps, x_position, y_position, z_position"):
        report.plot_exploration(runs[0], tmp_path / "x.png", "x_position", "height")
    with pytest.raises(ValueError, match=r"no visits of member 7; members: \[0, 1, 2, 3, 4\]"):
        report.plot_exploration(runs[0], tmp_path / "x.png", "x_position", "y_position", member=7)
    with pytest.raises(ValueError, match=r"has no visits.jsonl"):
        report.plot_exploration(runs[1], tmp_path / "x.png", "x_position", "y_position")


# --------------------------------------------------------------------------------- report


def test_write_report(tmp_path, runs):
    out_dir = tmp_path / "report"
    exploration = {"run_dir": runs[0], "x_key": "x_position", "y_key": "y_position"}
    written = report.write_report(runs, out_dir, exploration=exploration)
    assert written["markdown"] == out_dir / "results.md"
    assert written["latex"] == out_dir / "results.tex"
    assert [path.name for path in written["curves"]] == ["curves_ant_delayed.png", "curves_hopper_delayed.png"]
    assert written["exploration"] == out_dir / "exploration.png"
    markdown = written["markdown"].read_text()
    assert "## (a) Final episode reward" in markdown and "## (b) Area under learning curve" in markdown
    assert "![curves_ant_delayed.png](curves_ant_delayed.png)" in markdown
    assert "![exploration.png](exploration.png)" in markdown
    assert written["latex"].read_text() == report.results_tables(report.load_runs(runs))[1]
    for path in written["curves"] + [written["exploration"]]:
        assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert set(written) == {"markdown", "latex", "time_to_score", "curves", "exploration"}


def test_notes_for_cut_lines_and_members_without_evaluations(tmp_path):
    run_dir = write_run(tmp_path / "run", "ant_delayed", "pbac", {"pbac": [1.0, 2.0, 3.0]})
    config = json.loads((run_dir / "config.json").read_text())
    config["members"].append({"index": 3, "seed": 3, "label": "pbac", "overrides": {}})
    (run_dir / "config.json").write_text(json.dumps(config))
    with open(run_dir / "eval.jsonl", "a") as handle:
        handle.write('{"env_steps": 40000, "memb')  # a line cut short by a crash
    curves = report.load_runs(run_dir)
    assert curves.get("ant_delayed", "pbac").seeds == (0, 1, 2)
    assert curves.notes == (
        f"{run_dir / 'eval.jsonl'}: line 13 is not valid JSON and was skipped",
        f"{run_dir}: member 3 (pbac, seed 3) has no evaluations and is left out",
    )


def test_refuses_records_that_contradict_config(tmp_path):
    run_dir = write_run(tmp_path / "run", "ant_delayed", "pbac", {"pbac": [1.0, 2.0]})
    lines = (run_dir / "eval.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    (run_dir / "eval.jsonl").write_text("\n".join(lines + [json.dumps({**record, "env_steps": 99, "label": "sac"})]))
    with pytest.raises(ValueError, match=r"member 0 has label 'sac', config.json says 'pbac'"):
        report.load_runs(run_dir)
    (run_dir / "eval.jsonl").write_text("\n".join(lines + [lines[0]]))
    with pytest.raises(ValueError, match="member 0 is evaluated twice at 0 env steps"):
        report.load_runs(run_dir)
    (run_dir / "eval.jsonl").write_text("\n".join(lines + [json.dumps({**record, "member": 5})]))
    with pytest.raises(ValueError, match=r"has member 5, which config.json does not list"):
        report.load_runs(run_dir)


# ------------------------------------------------------------- success rate (paper Table 2)

MW_STEPS = [0, 330_000, 660_000, 990_000]
# Each seed's success rate at MW_STEPS (seeds 0..4); AULC is the mean of the four points.
MW_PBAC = [[0, .6, .8, 1.0], [0, .8, 1.0, 1.0], [0, .4, .6, 1.0], [0, .3, .5, .8], [0, .2, .3, .7]]
MW_DRND = [[0, .4, .6, 1.0], [0, .2, .4, .6], [0, .4, .6, 1.0], [0, .5, .6, .9], [0, 0, .1, .7]]
MW_BOOT = [[0, .2, .4, .6], [0, .2, .4, .6], [0, .4, .4, .8], [0, .3, .3, .6], [0, .2, .2, .4]]


def write_success_run(run_dir: Path, task: str, algorithm: str, curves: list[list[float]], status="finished") -> Path:
    """A run directory of an env that reports success: eval.jsonl records with "success_rate"
    (seeds 0.. in order, label = algorithm) and a return that is not the success rate."""
    run_dir.mkdir(parents=True)
    members, records = [], []
    for seed, curve in enumerate(curves):
        members.append({"index": seed, "seed": seed, "label": algorithm, "task": task, "overrides": {}})
        for env_steps, success in zip(MW_STEPS, curve):
            records.append(
                {
                    "env_steps": env_steps, "member": seed, "seed": seed, "label": algorithm, "task": task,
                    "return_mean": 120.0 * success, "return_std": 1.0, "length_mean": 500.0,
                    "success_rate": success, "returns": [120.0 * success] * 10, "lengths": [500] * 10,
                }
            )
    config = {"profile": task, "algorithm": algorithm, "config": {"train": {"env": task}}, "members": members}
    (run_dir / "config.json").write_text(json.dumps(config))
    (run_dir / "eval.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    (run_dir / "summary.json").write_text(json.dumps({"status": status, "message": ""}))
    return run_dir


@pytest.fixture
def success_runs(tmp_path):
    return [
        write_success_run(tmp_path / "mw_boot", "mw_reach", "bootdqn_p", MW_BOOT),
        write_success_run(tmp_path / "mw_drnd", "mw_reach", "drnd", MW_DRND),
        write_success_run(tmp_path / "mw_pbac", "mw_reach", "pbac", MW_PBAC),
    ]


def test_success_curves_final_and_area_per_seed(success_runs):
    curves = report.load_runs(success_runs)
    assert curves.success_tasks == ("mw_reach",) and curves.return_tasks == ()
    pbac = curves.get("mw_reach", "pbac")
    np.testing.assert_array_equal(pbac.success, MW_PBAC)
    assert pbac.final_success() == {0: 1.0, 1: 1.0, 2: 1.0, 3: 0.8, 4: 0.7}
    # AULC: (0 + 0.6 + 0.8 + 1.0) / 4 = 0.6, (0 + 0.8 + 1 + 1) / 4 = 0.7, then 0.5, 0.4, 0.3.
    assert list(pbac.success_aulcs().values()) == pytest.approx([0.6, 0.7, 0.5, 0.4, 0.3])


def test_success_table_is_mean_and_std_bold_by_the_paired_test(success_runs):
    markdown, latex = report.results_tables(report.load_runs(success_runs))
    final = markdown_rows(markdown, "(a) Final episode success rate")
    area = markdown_rows(markdown, "(b) Area under success rate curve")
    # Final: pbac [1, 1, 1, 0.8, 0.7] mean 0.9, std sqrt((3 x 0.01 + 0.01 + 0.04) / 5) = sqrt(0.016) = 0.126;
    # drnd [1, 0.6, 1, 0.9, 0.7] mean 0.84, std sqrt(0.132 / 5) = 0.162; pbac - drnd [0, 0.4, 0, -0.1, 0]:
    # mean 0.06, sd sqrt(0.152 / 4) = 0.195, t = 0.06 / (0.195 / sqrt 5) = 0.688, p = 0.265 -> bold.
    # bootdqn_p [0.6, 0.6, 0.8, 0.6, 0.4] mean 0.6, std sqrt(0.08 / 5) = 0.126; pbac - boot
    # [0.4, 0.4, 0.2, 0.2, 0.3]: mean 0.3, sd 0.1, t = 6.7, p = 0.0013 -> not bold.
    assert final["mw_reach"] == ["0.60 ± 0.13", "**0.84 ± 0.16**", "**0.90 ± 0.13**"]
    # AULC: pbac [0.6, 0.7, 0.5, 0.4, 0.3] mean 0.5, std sqrt(0.1 / 5) = 0.141; drnd [0.5, 0.3, 0.5,
    # 0.5, 0.2] mean 0.4, std sqrt(0.08 / 5) = 0.126, pbac - drnd [0.1, 0.4, 0, -0.1, 0.1]: t = 1.195,
    # p = 0.149 -> bold; boot [0.3, 0.3, 0.4, 0.3, 0.2] mean 0.3, std sqrt(0.02 / 5) = 0.063, pbac - boot
    # [0.3, 0.4, 0.1, 0.1, 0.1]: t = 3.16, p = 0.017 -> not bold.
    assert area["mw_reach"] == ["0.30 ± 0.06", "**0.40 ± 0.13**", "**0.50 ± 0.14**"]
    pbac_drnd = stats.paired_p_value([1, 1, 1, 0.8, 0.7], [1, 0.6, 1, 0.9, 0.7])
    assert pbac_drnd == pytest.approx(0.2646, abs=1e-4)
    assert stats.paired_p_value([0.6, 0.7, 0.5, 0.4, 0.3], [0.3, 0.3, 0.4, 0.3, 0.2]) == pytest.approx(0.0171, abs=1e-4)
    assert "## (a) Final episode reward" not in markdown  # no return task: no Table 1
    assert "Mean ± std over 5 seeds of the success rate" in markdown
    assert latex.count("\\begin{table}") == 2 and "\\label{tab:results_success_final}" in latex
    assert "    mw\\_reach & 0.60 $\\pm$ 0.13 & \\textbf{0.84 $\\pm$ 0.16} & \\textbf{0.90 $\\pm$ 0.13} \\\\" in latex
    assert "Mean $\\pm$ std over 5 seeds" in latex


def test_return_and_success_tasks_share_one_report(tmp_path, runs, success_runs):
    written = report.write_report(runs + success_runs, tmp_path / "report")
    markdown = written["markdown"].read_text()
    returns = markdown_rows(markdown, "(a) Final episode reward")
    success = markdown_rows(markdown, "(a) Final episode success rate")
    assert set(returns) == {"ant_delayed", "hopper_delayed"} and set(success) == {"mw_reach"}
    # Columns are every method (pbac, sac, the sweep, bootdqn_p, drnd); a task's missing methods are "-".
    assert returns["ant_delayed"] == ["**90 [60, 120]**", "78 [50, 100]", "-", "-", "-"]
    assert success["mw_reach"] == ["**0.90 ± 0.13**", "-", "-", "0.60 ± 0.13", "**0.84 ± 0.16**"]
    assert "IQM over 5 seeds" in markdown and "Mean ± std over 5 seeds" in markdown
    assert written["latex"].read_text().count("\\begin{table}") == 4
    names = [path.name for path in written["curves"]]
    assert names == ["curves_ant_delayed.png", "curves_hopper_delayed.png", "success_mw_reach.png"]
    image = matplotlib.image.imread(written["curves"][2])
    for colour in ("C0", "C1", "C2"):  # each method's mean success line, in its colour
        rgb = np.array(matplotlib.colors.to_rgb(colour))
        assert (np.abs(image[..., :3] - rgb).max(axis=-1) < 0.05).sum() > 100
    assert "![success_mw_reach.png](success_mw_reach.png)" in markdown


def test_a_method_without_success_rates_reports_its_task_by_return(tmp_path, success_runs):
    old = write_run(tmp_path / "mw_ben", "mw_reach", "ben", {"ben": [1.0, 2.0, 3.0, 4.0, 5.0]})
    curves = report.load_runs(success_runs + [old])
    assert curves.success_tasks == () and curves.return_tasks == ("mw_reach",)
    assert any("mw_reach: ben carry no success rate" in note for note in curves.notes)
    markdown, _ = report.results_tables(curves)
    assert "## (a) Final episode reward" in markdown and "success rate (paper Table 2)" not in markdown


# -- time to score ----------------------------------------------------------------------------

TTS_STEPS = [0, 10_000, 20_000, 30_000]


def write_timed_run(
    run_dir: Path, task: str, label: str, returns: list[list[float]], wall: list, train: list, seeds=None, num_envs=None
) -> Path:
    """A run directory whose eval rows carry the runner's clocks: returns[seed][point]; wall[p] and
    train[p] (None: a row written before the clocks existed, so it has neither); `num_envs`, the
    config's envs per seed (None: not said)."""
    run_dir.mkdir(parents=True)
    members, records = [], []
    for position, curve in enumerate(returns):
        seed = position if seeds is None else seeds[position]
        members.append({"index": position, "seed": seed, "label": label, "overrides": {}})
        for env_steps, value, wall_s, train_s in zip(TTS_STEPS, curve, wall, train):
            record = {
                "env_steps": env_steps, "member": position, "seed": seed, "label": label, "return_mean": value,
                "return_std": 0.0, "length_mean": 1000.0, "returns": [value], "lengths": [1000],
            }
            if wall_s is not None:
                record.update(wall_s=wall_s, train_s=train_s)
            records.append(record)
    train_section = {"env": task} if num_envs is None else {"env": task, "num_envs": num_envs}
    config = {"profile": "test", "algorithm": label, "config": {"train": train_section}, "members": members}
    (run_dir / "config.json").write_text(json.dumps(config))
    (run_dir / "eval.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    (run_dir / "summary.json").write_text(json.dumps({"status": "finished", "message": ""}))
    return run_dir


# Five seeds x four points. At 10,000 steps the IQM is (700 + 780 + 790) / 3 = 756.7 < 785 (the
# paper's PBAC final on cartpole) though two seeds are above it and the max is 1,000; at 20,000
# it is (790 + 800 + 810) / 3 = 800 >= 785. SAC's seeds never pass 700.
CARTPOLE_PBAC = [[0, 0, 0, 500], [0, 700, 790, 800], [0, 780, 800, 820], [0, 790, 810, 830], [0, 1000, 1000, 1000]]
CARTPOLE_SAC = [[0, 100, 300, 700]] * 5


def _row(rows, method, score=None):
    (found,) = [row for row in rows if row.method == method and (score is None or row.score == pytest.approx(score))]
    return found


def test_time_to_score_first_point_where_the_iqm_reaches_the_paper_score(tmp_path):
    runs = [
        write_timed_run(tmp_path / "pbac", "cartpole_swingup_sparse", "pbac", CARTPOLE_PBAC, [4.0, 70.0, 130.0, 190.0], [0.0, 50.0, 100.0, 150.0]),
        write_timed_run(tmp_path / "sac", "cartpole_swingup_sparse", "sac", CARTPOLE_SAC, [3.0, 40.0, 80.0, 120.0], [0.0, 30.0, 60.0, 90.0]),
    ]
    rows = report.time_to_score(report.load_runs(runs))
    pbac = _row(rows, "pbac")
    assert (pbac.score, pbac.score_source, pbac.statistic) == (785.0, "paper PBAC final", "IQM return")
    assert (pbac.reached, pbac.env_steps, pbac.wall_s, pbac.train_s) == (True, 20_000, 130.0, 100.0)
    assert (pbac.seeds, pbac.best_env_steps, pbac.final_wall_s) == (5, 30_000, 190.0)
    assert pbac.final == pytest.approx((800 + 820 + 830) / 3)
    sac = _row(rows, "sac")  # not reached is a value, not an error
    assert (sac.reached, sac.env_steps, sac.wall_s, sac.train_s) == (False, None, None, None)
    assert (sac.best, sac.best_env_steps, sac.final) == (700.0, 30_000, 700.0)
    # Fractions of the score: 0.5 x 785 = 392.5 is reached at 10,000 steps by PBAC, at 30,000 by SAC.
    rows = report.time_to_score(report.load_runs(runs), fractions=(0.5, 1.0))
    assert _row(rows, "pbac", 392.5).env_steps == 10_000 and _row(rows, "pbac", 392.5).wall_s == 70.0
    assert _row(rows, "sac", 392.5).score_source == "0.5 x paper PBAC final 785"
    assert _row(rows, "sac", 392.5).env_steps == 30_000 and _row(rows, "sac", 785).env_steps is None
    # --score: one for every task, or per task; a task the paper does not report has none.
    assert _row(report.time_to_score(report.load_runs(runs), {None: 760.0}), "pbac").env_steps == 20_000
    assert _row(report.time_to_score(report.load_runs(runs), {"cartpole_swingup_sparse": 700.0}), "sac").env_steps == 30_000
    chain = write_timed_run(tmp_path / "chain", "chain", "pbac", [[0, 1, 2, 3]], [1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 2.0, 3.0])
    (unknown,) = report.time_to_score(report.load_runs([chain]), fractions=(0.9, 1.0))
    assert (unknown.score, unknown.reached) == (None, False)


def test_time_to_score_of_a_resumed_run_reads_its_continued_clocks(tmp_path):
    # A run interrupted after 10,000 steps and resumed: the rows after the resume carry the clocks
    # continued from the checkpoint (the runner's Clocks), so the reached point's wall-clock counts
    # the first process's time too.
    resumed = write_timed_run(tmp_path / "resumed", "cartpole_swingup_sparse", "pbac", CARTPOLE_PBAC, [4.0, 70.0, 160.0, 230.0], [0.0, 50.0, 110.0, 170.0])
    row = _row(report.time_to_score(report.load_runs([resumed])), "pbac")
    assert (row.env_steps, row.wall_s, row.train_s) == (20_000, 160.0, 110.0)
    # Resumed from a run whose earlier rows predate the clocks: steps are still found; the wall-clock
    # only where the rows carry one.
    older = write_timed_run(tmp_path / "older", "cartpole_swingup_sparse", "pbac", CARTPOLE_PBAC, [None, None, 80.0, 140.0], [None, None, 60.0, 120.0])
    rows = report.time_to_score(report.load_runs([older]), fractions=(0.5, 1.0))
    assert (_row(rows, "pbac", 392.5).env_steps, _row(rows, "pbac", 392.5).wall_s) == (10_000, None)
    assert (_row(rows, "pbac", 785).env_steps, _row(rows, "pbac", 785).wall_s) == (20_000, 80.0)
    # Seeds from two runs (one after another): the point is reached when the later run reaches it.
    first = write_timed_run(tmp_path / "a", "reacher_hard", "pbac", [[0, 900, 950, 950]] * 3, [1.0, 10.0, 20.0, 30.0], [0.0, 8.0, 16.0, 24.0])
    second = write_timed_run(tmp_path / "b", "reacher_hard", "pbac", [[0, 900, 950, 950]] * 2, [2.0, 15.0, 25.0, 35.0], [0.0, 9.0, 18.0, 27.0], seeds=[3, 4])
    row = _row(report.time_to_score(report.load_runs([first, second])), "pbac")
    assert (row.seeds, row.score, row.env_steps, row.wall_s, row.train_s) == (5, 912.0, 20_000, 25.0, 18.0)


def test_time_to_score_of_a_success_task_is_the_mean_success_rate(tmp_path, success_runs):
    rows = {row.method: row for row in report.time_to_score(report.load_runs(success_runs))}
    # The paper's PBAC final success on reach is 1.00: PBAC's mean reaches it at the last point
    # (MW_PBAC's last column: 1, 1, 1, .8, .7 -> 0.9) - not reached; at 0.8 x 1.00 it is.
    assert rows["pbac"].statistic == "mean success rate" and rows["pbac"].score == 1.0 and not rows["pbac"].reached
    rows = {row.method: row for row in report.time_to_score(report.load_runs(success_runs), fractions=(0.8,))}
    assert rows["pbac"].env_steps == MW_STEPS[3] and rows["bootdqn_p"].env_steps is None
    assert rows["pbac"].wall_s is None  # these logs carry no clock


def test_vector_steps_axis_divides_env_steps_by_each_runs_envs_per_seed(tmp_path, monkeypatch):
    """`--x vector` draws each method at env steps / its runs' envs per seed, so a 64-env recipe
    and a 16-env one meet at equal vector steps (equal GPU cost where the physics is
    latency-bound); a method whose seeds' runs differ in envs per seed, or whose logs do not say,
    cannot be placed: it is left out and named in the legend's title."""
    drawn = []
    save = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda figure, *a, **k: (drawn.append(figure), save(figure, *a, **k))[1])
    clocks = ([1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 2.0, 3.0])
    curves = [[0, 100, 200, 300]] * 2
    n16 = write_timed_run(tmp_path / "n16", "ant_delayed", "pbac", curves, *clocks, num_envs=16)
    n64 = write_timed_run(tmp_path / "n64", "ant_delayed", "pbac", curves, *clocks, num_envs=64)
    mixed = write_timed_run(tmp_path / "mixed", "ant_delayed", "sac", curves, *clocks, num_envs=32)
    other = write_timed_run(tmp_path / "other", "ant_delayed", "sac", curves, *clocks, seeds=[2, 3], num_envs=8)
    old = write_timed_run(tmp_path / "old", "ant_delayed", "td3", curves, *clocks)
    loaded = report.load_runs([n16, n64, old], by_run=True)
    assert [loaded.get("ant_delayed", m).num_envs for m in ("n16/pbac", "n64/pbac", "old/td3")] == [16, 64, None]
    (path,) = report.plot_curves(loaded, tmp_path / "by_run", x="vector")
    assert path.name == "curves_vector_ant_delayed.png" and path.read_bytes()[:8] == PNG_SIGNATURE
    axes = drawn[-1].axes[0]
    lines = {line.get_label().split(" (")[0]: line.get_xdata() for line in axes.lines}
    np.testing.assert_allclose(lines["n16/pbac"], np.array(TTS_STEPS) / 16)
    np.testing.assert_allclose(lines["n64/pbac"], np.array(TTS_STEPS) / 64)
    assert "old/td3" not in lines and axes.get_xlabel().startswith("vector steps per seed")
    assert axes.get_legend().get_title().get_text() == "envs per seed unknown or differing: old/td3"
    # Seeds of one method from runs of 32 and 8 envs per seed have no common vector step.
    combined = report.load_runs([mixed, other])
    assert combined.get("ant_delayed", "sac").num_envs is None and len(combined.get("ant_delayed", "sac").seeds) == 4
    report.plot_curves(combined, tmp_path / "combined", x="vector")  # nothing to draw: the axes say why
    axes = drawn[-1].axes[0]
    assert not axes.lines and axes.get_legend() is None
    assert [text.get_text() for text in axes.texts] == ["envs per seed unknown or differing: sac"]
    # A malformed env count is refused, naming the field, before anything is drawn.
    bad = write_timed_run(tmp_path / "bad", "ant_delayed", "pbac", curves, *clocks, num_envs=0)
    with pytest.raises(ValueError, match=r"bad/config.json: config.train.num_envs is 0; it must be a positive integer"):
        report.load_runs([bad])


def test_parse_scores_and_the_report_command_line(tmp_path, capsys):
    assert report.parse_scores(["700"]) == {None: 700.0}
    assert report.parse_scores(["cartpole_swingup_sparse=700", "reacher_hard=8e2"]) == {"cartpole_swingup_sparse": 700.0, "reacher_hard": 800.0}
    for bad, message in (("abc", "is not a number"), ("=5", "malformed score"), ("inf", "not finite"), ("x=1", None)):
        if message is None:
            with pytest.raises(ValueError, match="given twice"):
                report.parse_scores(["x=1", "x=2"])
        else:
            with pytest.raises(ValueError, match=message):
                report.parse_scores([bad])
    import train as cli

    run = write_timed_run(tmp_path / "pbac", "cartpole_swingup_sparse", "pbac", CARTPOLE_PBAC, [4.0, 70.0, 130.0, 190.0], [0.0, 50.0, 100.0, 150.0])
    out = tmp_path / "out"
    assert cli.run(["report", str(run), "--out", str(out), "--x", "steps", "vector", "wall", "train", "--score-fraction", "0.9", "1.0"]) == 0
    printed = capsys.readouterr().out
    assert "cartpole_swingup_sparse / pbac: score 706.5 (0.9 x paper PBAC final 785) reached at 10,000 env steps, 1.2 min wall-clock" in printed
    names = sorted(path.name for path in out.glob("*.png"))
    assert names == [
        "curves_cartpole_swingup_sparse.png", "curves_train_cartpole_swingup_sparse.png", "curves_vector_cartpole_swingup_sparse.png",
        "curves_wall_cartpole_swingup_sparse.png",
    ]
    markdown = (out / "results.md").read_text()
    assert "| cartpole_swingup_sparse | pbac | 5 | 785 (paper PBAC final) | 20,000 | 2.2 min | 1.7 min |" in markdown
    records = json.loads((out / "time_to_score.json").read_text())
    assert [(r["score"], r["env_steps"], r["reached"]) for r in records] == [(706.5, 10_000, True), (785.0, 20_000, True)]
    assert cli.run(["report", str(run), "--out", str(out), "--score", "cartpole=x"]) == 2
    assert "is not a number" in capsys.readouterr().err


QUICKSTART = Path(__file__).resolve().parent.parent / "docs" / "evidence" / "data" / "quickstart"
"""The quickstart run on file (its logs, no checkpoints) and the report drawn from it."""


def _curve_pixels(path: Path) -> np.ndarray:
    """The saturated pixels of a figure (curves, bands, markers), leaving out the black and grey of
    axes and text, whose rendering shifts with fonts and matplotlib versions."""
    rgb = matplotlib.image.imread(str(path))[..., :3]
    return (rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.25


def test_the_committed_report_is_redrawn_from_the_kept_files(tmp_path, monkeypatch):
    """docs/ keeps only what its figures are computed from: the report of the quickstart run on
    file, drawn again from config.json, eval.jsonl, summary.json and visits.jsonl, gives the same
    tables and time to score, and the same figures (same size, the same curves: the saturated
    pixels overlap) as the ones committed; every figure is a palette PNG of <= 256 colours."""
    from mjx_pbac.commands import report as command

    committed = QUICKSTART / "report"
    run = QUICKSTART.relative_to(QUICKSTART.parents[3]) / "quickstart-hopper-s0"
    monkeypatch.chdir(QUICKSTART.parents[3])  # the run's path as the committed report names it
    command.main([str(run), "--out", str(tmp_path), "--x", "steps", "wall", "--explore", f"{run},x_position,z_position"])
    for name in ("results.md", "results.tex", "time_to_score.json"):
        assert (tmp_path / name).read_text() == (committed / name).read_text(), name
    figures = sorted(path.name for path in committed.glob("*.png"))
    assert figures == sorted(path.name for path in tmp_path.glob("*.png")) == [
        "curves_hopper.png", "curves_wall_hopper.png", "exploration_0_hopper.png",
    ]
    for name in figures:
        redrawn, kept = _curve_pixels(tmp_path / name), _curve_pixels(committed / name)
        assert redrawn.shape == kept.shape, name
        overlap = (redrawn & kept).sum() / max((redrawn | kept).sum(), 1)
        assert kept.sum() > 500 and overlap > 0.8, (name, int(kept.sum()), overlap)
        with Image.open(tmp_path / name) as image:
            assert image.mode == "P" and len(image.getcolors(256) or []) <= 256, (name, image.mode)
