"""Finished runs in, the paper's tables and figures out (paper Tables 1 and 2, reward and success curves; docs/design.md "Statistics").

Reads run directories from disk only; it never imports the training loop or JAX. One module per step:

- `runs`: `load_runs`, the per-seed evaluation curves of every (task, method) (`Curves`,
  `MethodCurves`), checked for consistency; the run directory's files and what a task, a method
  and a seed are;
- `tables`: `results_tables`, the Markdown and LaTeX tables (paper Table 1: "IQM [lower, upper]"
  with the bold rule of `stats.bold`; paper Table 2 for success tasks: "mean ± std");
- `scores`: `time_to_score`, when each method first reached a score, and the run's clocks there;
- `figures`: `plot_curves`, one PNG per task against env steps or a clock (`CLOCKS`), and
  `plot_exploration`, the states a run visited, one panel per phase of training;
- `write`: `write_report`, all of the above into one directory.

The public names of each are re-exported here: `from mjx_pbac import report; report.load_runs(...)`.
"""

from mjx_pbac.report.figures import CLOCKS, plot_curves, plot_exploration
from mjx_pbac.report.runs import Curves, MethodCurves, PathLike, load_runs
from mjx_pbac.report.scores import ScoreTime, parse_scores, time_to_score, time_to_score_markdown
from mjx_pbac.report.tables import format_cell, format_mean_std, results_tables
from mjx_pbac.report.write import ExplorationPlot, write_report

__all__ = [
    "CLOCKS",
    "Curves",
    "ExplorationPlot",
    "MethodCurves",
    "PathLike",
    "ScoreTime",
    "format_cell",
    "format_mean_std",
    "load_runs",
    "parse_scores",
    "plot_curves",
    "plot_exploration",
    "results_tables",
    "time_to_score",
    "time_to_score_markdown",
    "write_report",
]
