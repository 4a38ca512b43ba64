"""The paper's reported results, in one place: what our runs are compared with.

Table 1 ("DMC and MuJoCo", section 4): IQM over ten seeds with [lower, upper] quantiles of the
final episode reward and of the area under the learning curve, per task and method. Table 2
("Sparse Meta-World"): mean ± std over five seeds of the final success rate and of the area under
the success rate curve. Values are copied from the paper's LaTeX source (ECAI 2025) as printed;
task names are our registry's (`envs.registered_names()`).

`score(task)` is the default target of `train.py report`'s time-to-score table: PBAC's final
value on that task (Table 1's final IQM; Table 2's final mean success rate).

Imports nothing but the standard library, so `mjx_pbac.report` can read it without JAX.
"""

from __future__ import annotations

from typing import NamedTuple

METHODS = ("ben", "bootdqn_p", "drnd", "pbac")
"""The paper's columns, in its order (our algorithm names)."""


class Iqm(NamedTuple):
    """A Table 1 cell: IQM over seeds, with the 25 % and 75 % quantiles."""

    iqm: float
    lower: float
    upper: float


class MeanStd(NamedTuple):
    """A Table 2 cell: mean and standard deviation over seeds of a success rate in [0, 1]."""

    mean: float
    std: float


def _row(*cells: tuple[float, float, float]) -> dict[str, Iqm]:
    return {method: Iqm(*cell) for method, cell in zip(METHODS, cells)}


TABLE1_FINAL: dict[str, dict[str, Iqm]] = {
    "ball_in_cup_catch": _row((977, 971, 980), (973, 965, 978), (973, 970, 977), (978, 974, 981)),
    "cartpole_swingup_sparse": _row((796, 186, 836), (601, 379, 770), (0.0, 0.0, 0.0), (785, 584, 819)),
    "reacher_hard": _row((903, 799, 975), (959, 911, 965), (846, 762, 875), (912, 861, 966)),
    "ant": _row((5579, 5114, 5685), (298, 114, 430), (3080, 1172, 4243), (6376, 6215, 6472)),
    "hopper": _row((1051, 567, 1443), (1988, 1260, 2494), (1864, 1103, 2914), (1410, 1238, 1606)),
    "humanoid": _row((1782, 1443, 2008), (311, 243, 372), (5144, 4743, 5879), (2237, 1394, 2487)),
    "ant_delayed": _row((4580, 3369, 4980), (-432, -542, -339), (10.0, 8.3, 12.7), (5138, 4770, 5457)),
    "ant_very_delayed": _row((2051, -1, 3661), (-169, -291, -136), (-2.8, -2.8, -2.4), (3905, 3398, 4864)),
    "hopper_delayed": _row((813, 689, 928), (1067, 659, 1340), (440, 295, 525), (775, 722, 910)),
    "hopper_very_delayed": _row((190, 6, 643), (388, -0, 1579), (82, -0, 347), (516, 419, 580)),
    "humanoid_delayed": _row((6.0, 5.9, 6.1), (-3.3, -13.6, 4.6), (5.9, 5.8, 5.9), (281, 208, 551)),
}
"""Table 1 (a): final episode reward, IQM [lower, upper] over ten seeds."""

TABLE1_AULC: dict[str, dict[str, Iqm]] = {
    "ball_in_cup_catch": _row((954, 936, 963), (801, 778, 861), (863, 773, 951), (945, 837, 968)),
    "cartpole_swingup_sparse": _row((423, 179, 513), (527, 412, 609), (0.0, 0.0, 0.0), (500, 410, 561)),
    "reacher_hard": _row((708, 628, 734), (730, 698, 764), (624, 494, 695), (753, 657, 806)),
    "ant": _row((3103, 2719, 3387), (511, 486, 547), (1799, 596, 2613), (4719, 4215, 4827)),
    "hopper": _row((839, 733, 986), (974, 949, 1005), (952, 736, 1365), (1565, 1415, 1692)),
    "humanoid": _row((1227, 1118, 1295), (258, 240, 265), (2677, 2416, 3026), (1352, 1197, 1441)),
    "ant_delayed": _row((2705, 1804, 3126), (-307, -319, -288), (-0.9, -3.8, 1.6), (3732, 3519, 4000)),
    "ant_very_delayed": _row((875, -16, 1494), (-16, -76, 53), (-7.6, -9.0, -6.0), (2297, 1783, 2973)),
    "hopper_delayed": _row((611, 554, 734), (275, 170, 394), (309, 267, 368), (803, 646, 970)),
    "hopper_very_delayed": _row((367, 72, 537), (62, -0, 248), (55, -0, 250), (344, 270, 374)),
    "humanoid_delayed": _row((0.6, 0.2, 1.2), (-0.9, -3.5, 1.9), (4.9, 4.9, 5.0), (117, 98, 427)),
}
"""Table 1 (b): area under the learning curve, IQM [lower, upper] over ten seeds."""


def _success_row(*cells: tuple[float, float]) -> dict[str, MeanStd]:
    return {method: MeanStd(*cell) for method, cell in zip(METHODS, cells)}


TABLE2_FINAL: dict[str, dict[str, MeanStd]] = {
    "mw_window_close": _success_row((0.20, 0.40), (0.00, 0.00), (0.98, 0.04), (0.88, 0.16)),
    "mw_window_open": _success_row((0.00, 0.00), (0.04, 0.08), (0.80, 0.40), (0.56, 0.35)),
    "mw_drawer_close": _success_row((0.96, 0.08), (0.62, 0.47), (1.00, 0.00), (0.92, 0.12)),
    "mw_drawer_open": _success_row((0.00, 0.00), (0.00, 0.00), (1.00, 0.00), (0.78, 0.26)),
    "mw_reach": _success_row((0.60, 0.49), (0.00, 0.00), (0.80, 0.40), (1.00, 0.00)),
    "mw_button_press_topdown": _success_row((0.00, 0.00), (0.00, 0.00), (0.20, 0.40), (0.96, 0.05)),
    "mw_door_open": _success_row((0.00, 0.00), (0.00, 0.00), (0.60, 0.49), (0.98, 0.04)),
}
"""Table 2 (a): final episode success rate, mean ± std over five seeds."""

TABLE2_AULC: dict[str, dict[str, MeanStd]] = {
    "mw_window_close": _success_row((0.18, 0.38), (0.06, 0.23), (0.92, 0.26), (0.89, 0.26)),
    "mw_window_open": _success_row((0.00, 0.00), (0.15, 0.36), (0.76, 0.43), (0.73, 0.35)),
    "mw_drawer_close": _success_row((0.94, 0.18), (0.61, 0.48), (0.97, 0.15), (0.88, 0.25)),
    "mw_drawer_open": _success_row((0.00, 0.00), (0.00, 0.00), (0.81, 0.39), (0.80, 0.34)),
    "mw_reach": _success_row((0.56, 0.49), (0.00, 0.00), (0.78, 0.42), (0.98, 0.14)),
    "mw_button_press_topdown": _success_row((0.00, 0.00), (0.00, 0.00), (0.19, 0.39), (0.68, 0.38)),
    "mw_door_open": _success_row((0.00, 0.00), (0.00, 0.00), (0.50, 0.49), (0.69, 0.43)),
}
"""Table 2 (b): area under the success rate curve, mean ± std over five seeds."""


def score(task: str) -> float | None:
    """PBAC's final result on `task` in the paper: Table 1's final IQM (a return) or Table 2's
    final mean success rate (in [0, 1]); None for a task the paper does not report."""
    if task in TABLE1_FINAL:
        return float(TABLE1_FINAL[task]["pbac"].iqm)
    if task in TABLE2_FINAL:
        return float(TABLE2_FINAL[task]["pbac"].mean)
    return None
