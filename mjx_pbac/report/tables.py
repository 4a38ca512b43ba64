"""The paper's results tables from loaded curves (`runs.Curves`), as Markdown and LaTeX.

`results_tables`: (a) final episode reward and (b) AULC, as "IQM [lower, upper]" with the bold
rule of `stats.bold` (paper Table 1); for the tasks whose every evaluation carries a success rate
(Meta-World), (a) final episode success rate and (b) area under the success rate curve as
"mean ± std" over seeds instead, bold by the best mean (paper Table 2). `format_cell` and
`format_mean_std` are how one cell reads.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

from mjx_pbac import paper, stats
from mjx_pbac.report.runs import Curves, MethodCurves


def _decimals(*values: float) -> int:
    """Digits after the point: none from 100 up (977), one from 1 (10.0, -2.8), then three
    significant digits (0.0123), like the paper's Table 1."""
    scale = max((abs(value) for value in values if math.isfinite(value)), default=0.0)
    if scale >= 100:
        return 0
    if scale >= 1 or scale == 0:
        return 1
    return min(6, 2 - math.floor(math.log10(scale)))


def _number(value: float, decimals: int) -> str:
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.{decimals}f}"
    return text[1:] if re.fullmatch(r"-0\.?0*", text) else text  # no "-0"


def format_cell(score: tuple[float, float, float]) -> str:
    """"IQM [lower, upper]" with one rounding for the three numbers (`_decimals`)."""
    decimals = _decimals(*score)
    middle, lower, upper = (_number(value, decimals) for value in score)
    return f"{middle} [{lower}, {upper}]"


def format_mean_std(score: tuple[float, float]) -> str:
    """"mean ± std" of success rates with two decimals, as the paper's Table 2 prints them
    (fractions in [0, 1], e.g. 0.88 ± 0.16)."""
    mean, std = (_number(value, 2) for value in score)
    return f"{mean} ± {std}"


@dataclasses.dataclass(frozen=True)
class _Table:
    """One paper table (a pair of metrics) and how its cells read."""

    metrics: tuple[tuple[str, str, Any], ...]
    """(LaTeX label key, title, per-seed values of a MethodCurves) per sub-table."""
    location: str
    """How the best method is found (`stats.bold`): "iqm" or "mean"."""
    summary: str
    """The caption's statistic: "IQM" or "Mean ± std"."""
    rule: str
    """The caption after the seed count."""
    cell: Any
    """Per-seed values -> cell text."""


_RULE = (
    "with [25%, 75%] quantiles. Bold: the highest IQM and every method not significantly worse "
    "(one-sided paired t-test over the shared seeds, p >= 0.05)."
)
_SUCCESS_RULE = (
    "of the success rate (fraction of the evaluation episodes that succeeded; AULC: per seed, the mean "
    "over evaluation points). Bold: the highest mean and every method not significantly worse "
    "(one-sided paired t-test over the shared seeds, p >= 0.05)."
)

_RETURN_TABLE = _Table(
    metrics=(
        ("final", "(a) Final episode reward", MethodCurves.final_rewards),
        ("aulc", "(b) Area under learning curve", MethodCurves.aulcs),
    ),
    location="iqm",
    summary="IQM",
    rule=_RULE,
    cell=lambda values: format_cell(stats.iqm(values)),
)
"""Paper Table 1: evaluation return."""

_SUCCESS_TABLE = _Table(
    metrics=(
        ("success_final", "(a) Final episode success rate", MethodCurves.final_success),
        ("success_aulc", "(b) Area under success rate curve", MethodCurves.success_aulcs),
    ),
    location="mean",
    summary="Mean ± std",
    rule=_SUCCESS_RULE,
    cell=lambda values: format_mean_std(stats.mean_std(values)),
)
"""Paper Table 2: Meta-World's success rate."""

_METRICS = _RETURN_TABLE.metrics

_PAPER_VALUES: dict[str, tuple[dict[str, dict[str, Any]], Any, str]] = {
    "final": (paper.TABLE1_FINAL, format_cell, "Table 1 (a), IQM [25%, 75%] over 10 seeds"),
    "aulc": (paper.TABLE1_AULC, format_cell, "Table 1 (b), IQM [25%, 75%] over 10 seeds"),
    "success_final": (paper.TABLE2_FINAL, format_mean_std, "Table 2 (a), mean ± std over 5 seeds"),
    "success_aulc": (paper.TABLE2_AULC, format_mean_std, "Table 2 (b), mean ± std over 5 seeds"),
}
"""Per metric key: the paper's values (`mjx_pbac.paper`), how a cell reads, and where they are printed."""


def _paper_rows(curves: Curves, key: str, tasks: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The paper's cells for the tasks and methods of `curves` that it reports ("-" elsewhere);
    empty when it reports none of them."""
    values, cell, _ = _PAPER_VALUES[key]
    rows = [
        (task, [cell(values[task][method]) if method in values[task] else "-" for method in curves.methods])
        for task in tasks
        if task in values
    ]
    return rows if any(text != "-" for _, cells in rows for text in cells) else []


def _tables(curves: Curves) -> list[tuple[_Table, tuple[str, ...]]]:
    """The tables to write and their rows: return tasks as Table 1, success tasks as Table 2."""
    tables = [(_RETURN_TABLE, curves.return_tasks), (_SUCCESS_TABLE, curves.success_tasks)]
    return [(table, tasks) for table, tasks in tables if tasks]


def _rows(
    curves: Curves, per_seed, tasks: Sequence[str] | None = None, table: _Table = _RETURN_TABLE
) -> list[tuple[str, list[tuple[str, bool] | None]]]:
    """Per task (default: every task): per method, (cell text, bold) or None when the pair was not run."""
    rows = []
    for task in curves.tasks if tasks is None else tasks:
        values = {
            method: per_seed(curves.entries[(task, method)])
            for method in curves.methods
            if (task, method) in curves.entries
        }
        bolded = stats.bold(values, location=table.location)

        def text(method):
            dagger = "†" if curves.entries[(task, method)].unfinished else ""  # noqa: B023 - called in this iteration
            return table.cell(list(values[method].values())) + dagger  # noqa: B023 - called in this iteration

        cells = [(text(method), method in bolded) if method in values else None for method in curves.methods]
        rows.append((task, cells))
    return rows


def _seed_line(curves: Curves, tasks: Sequence[str] | None = None, summary: str = "IQM") -> str:
    counts = {
        (task, method): len(entry.seeds)
        for (task, method), entry in curves.entries.items()
        if tasks is None or task in tasks
    }
    most = max(counts.values())
    if min(counts.values()) == most:
        return f"{summary} over {most} seeds"
    fewer = ", ".join(f"{task}/{method}: {n}" for (task, method), n in counts.items() if n < most)
    return f"{summary} over up to {most} seeds (fewer in {fewer})"


def _any_unfinished(curves: Curves) -> bool:
    return any(entry.unfinished for entry in curves.entries.values())


def _markdown(curves: Curves) -> str:
    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    unfinished = " †: from a run that did not finish (see Notes)." if _any_unfinished(curves) else ""
    lines = ["# Results", ""]
    for table, tasks in _tables(curves):
        if table is _SUCCESS_TABLE:
            lines += ["## Success rate (paper Table 2)", ""]
        lines += [f"{_seed_line(curves, tasks, table.summary)} {table.rule} '-': not run.{unfinished}", ""]
        for key, title, per_seed in table.metrics:
            header = ["| Task | " + " | ".join(escape(method) for method in curves.methods) + " |", "|---|" + "---|" * len(curves.methods)]
            lines += [f"## {title}", "", *header]
            for task, cells in _rows(curves, per_seed, tasks, table):
                texts = ["-" if cell is None else (f"**{cell[0]}**" if cell[1] else cell[0]) for cell in cells]
                lines.append(f"| {escape(task)} | " + " | ".join(texts) + " |")
            lines.append("")
            paper_rows = _paper_rows(curves, key, tasks)
            if paper_rows:
                where = _PAPER_VALUES[key][2]
                lines += [f"## {title}: the paper", "", f"The paper's values for the same tasks and methods ({where}, at its own settings); '-': not in the paper.", "", *header]
                lines += [f"| {escape(task)} | " + " | ".join(cells) + " |" for task, cells in paper_rows]
                lines.append("")
    if curves.notes:
        lines += ["## Notes", ""] + [f"- Note: {note}" for note in curves.notes] + [""]
    return "\n".join(lines)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(character, character) for character in text)


def _latex(curves: Curves) -> str:
    lines = ["% Results tables (needs \\usepackage{booktabs}); written by mjx_pbac.report."]
    lines += [f"% Note: {note}" for note in curves.notes]
    for table, tasks, (key, title, per_seed) in ((t, ts, m) for t, ts in _tables(curves) for m in t.metrics):
        rule = _latex_escape(table.rule).replace("p >= 0.05", "$p \\geq 0.05$")
        seeds = _latex_escape(_seed_line(curves, tasks, table.summary)).replace("±", "$\\pm$")
        dagger = " $^\\dagger$: from a run that did not finish." if _any_unfinished(curves) else ""
        caption = f"{_latex_escape(title)} ($\\uparrow$). {seeds} {rule} -: not run.{dagger}"
        lines += [
            "",
            "\\begin{table}[t]",
            "  \\centering",
            f"  \\caption{{{caption}}}",
            f"  \\label{{tab:results_{key}}}",
            f"  \\begin{{tabular}}{{l{'c' * len(curves.methods)}}}",
            "    \\toprule",
            "    Task & " + " & ".join(_latex_escape(method) for method in curves.methods) + " \\\\",
            "    \\midrule",
        ]
        for task, cells in _rows(curves, per_seed, tasks, table):
            texts = [
                "-" if cell is None
                else (f"\\textbf{{{cell[0]}}}" if cell[1] else cell[0]).replace("†", "$^\\dagger$").replace("±", "$\\pm$")
                for cell in cells
            ]
            lines.append(f"    {_latex_escape(task)} & " + " & ".join(texts) + " \\\\")
        lines += ["    \\bottomrule", "  \\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


def results_tables(curves: Curves) -> tuple[str, str]:
    """(markdown, latex): (a) final episode reward and (b) AULC, like the paper's Table 1, and
    for the success tasks (`Curves.success_tasks`, Meta-World) (a) final episode success rate and
    (b) area under the success rate curve, like the paper's Table 2.

    Rows are tasks, columns methods. A Table 1 cell is "IQM [lower, upper]" across seeds
    (`stats.iqm`) of the per-seed mean return at the last evaluation point, or of the per-seed
    AULC; a Table 2 cell is "mean ± std" across seeds (`stats.mean_std`) of the per-seed success
    rate at the last evaluation point, or of its mean over the evaluation points. Bold
    (**x** / \\textbf{x}) per row as `stats.bold` decides (by the IQM, or the mean for Table 2);
    "-" where a (task, method) was not run. A caption line gives the number of seeds; the notes of
    `curves` follow (Markdown) or lead as comments (LaTeX). In the Markdown, each table is
    followed by the paper's values for the same tasks and methods (`mjx_pbac.paper`), where the
    paper reports any.
    """
    if not curves.entries:
        raise ValueError("no evaluations to tabulate")
    return _markdown(curves), _latex(curves)
