"""MJX's constraint solve with fixed trip counts: no data-dependent loop, no `lax.cond`.

MJX 3.17.0 (`mujoco.mjx._src.solver`) solves the constraint forces of every forward pass with a
`lax.while_loop` that stops on a tolerance test, and runs its line search as a `lax.scan` whose
every trip holds a `lax.cond`. On XLA:GPU both cost a device-to-host copy of the predicate and a
wait on every trip (~72-100 per Ant env step: 4 RK4 stages x 5 substeps x the solver's trips),
and the while loop's trip count is the slowest instance's in a batch.

`fixed_trip_solver()` swaps in, while MJX is being traced:

- `solve_fixed_trips`: MJX's own Newton/CG iteration (its `Context`, `_linesearch`,
  `_update_constraint`, `_update_gradient` and stopping test), run for exactly `opt.iterations`
  trips of a `lax.scan`; once the stopping test holds, the remaining trips keep the converged
  context (a select, not a branch). Same iterates, same result as MJX's while loop.
- `scan_while`: the same for MJX's `_while_loop_scan` (the line search), without its `lax.cond`.

These reach into MJX's private solver module, so the pinned version is checked on use and
`tests/test_mjx_solver.py` compares the results with MJX's own solve.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jp
import mujoco
from mujoco.mjx._src import math as mjx_math, solver as mjx_solver
from mujoco.mjx._src.types import DisableBit, SolverType

PINNED_MUJOCO = "3.17.0"
"""The MuJoCo/MJX release whose private solver API this module was written and tested against."""

_PRIVATE_NAMES = ("Context", "_linesearch", "_update_constraint", "_update_gradient", "_rescale", "_while_loop_scan", "solve")


def require_pinned_mjx(patcher: str, module: Any, names: tuple[str, ...], fallback: str) -> None:
    """Raises a clear error when the installed MJX is not the release whose private `module`
    the module `patcher` replaces parts of, or lacks one of `names`; `fallback` is the env
    override that does without the patch."""
    missing = [name for name in names if not hasattr(module, name)]
    if mujoco.__version__ != PINNED_MUJOCO or missing:
        raise RuntimeError(
            f"{patcher} patches MJX {PINNED_MUJOCO}'s private {module.__name__.rsplit('.', 1)[-1]} module, but mujoco "
            f"{mujoco.__version__} is installed" + (f" (missing: {', '.join(missing)})" if missing else "")
            + f"; install mujoco=={PINNED_MUJOCO} mujoco-mjx=={PINNED_MUJOCO} (the project's pins), or "
            f"use the env override {fallback}"
        )


def check_mjx_version() -> None:
    """Raises a clear error when the installed MJX is not the release this module was tested on."""
    require_pinned_mjx("envs.mjx_solver", mjx_solver, _PRIVATE_NAMES, "solver_loop=while math=mjx (MJX's own solve and math)")


def scan_while(cond_fun: Callable[[Any], jax.Array], body_fun: Callable[[Any], Any], init_val: Any, max_iter: int) -> Any:
    """`while cond_fun(val): val = body_fun(val)` for at most `max_iter` trips, as a `lax.scan`
    of exactly `max_iter` trips: the body runs on every trip and its result is kept only while
    the loop would still be running (trip counts known to XLA, no branch)."""

    def trip(carry, _):
        val, running = carry
        stepped = body_fun(val)
        val = jax.tree.map(lambda new, old: jp.where(running, new, old), stepped, val)
        return (val, jp.logical_and(running, cond_fun(val))), None

    (val, _), _ = jax.lax.scan(trip, (init_val, cond_fun(init_val)), None, length=max_iter)
    return val


def solve_fixed_trips(m: Any, d: Any) -> Any:
    """MJX's constraint solve (Newton or CG) run for exactly `m.opt.iterations` trips."""
    S = mjx_solver

    def running(ctx):
        improvement = S._rescale(m, d, ctx.prev_cost - ctx.cost)
        gradient = S._rescale(m, d, mjx_math.norm(ctx.grad))
        converged = (improvement < m.opt.tolerance) | (gradient < m.opt.tolerance)
        return (ctx.solver_niter < m.opt.iterations) & ~converged

    def iterate(ctx):
        ctx = S._linesearch(m, d, ctx)
        prev_grad, prev_mgrad = ctx.grad, ctx.Mgrad
        ctx = S._update_gradient(m, d, S._update_constraint(m, d, ctx))
        if m.opt.solver == SolverType.NEWTON:
            search = -ctx.Mgrad
        else:  # Polak-Ribiere conjugate gradient
            beta = jp.dot(ctx.grad, ctx.Mgrad - prev_mgrad)
            beta = jp.maximum(0, beta / jp.maximum(mujoco.mjMINVAL, jp.dot(prev_grad, prev_mgrad)))
            search = -ctx.Mgrad + beta * ctx.search
        return ctx.replace(search=search, solver_niter=ctx.solver_niter + 1)

    qacc = d.qacc_smooth
    if not m.opt.disableflags & DisableBit.WARMSTART:
        warm = S.Context.create(m, d.replace(qacc=d.qacc_warmstart), grad=False)
        smooth = S.Context.create(m, d.replace(qacc=d.qacc_smooth), grad=False)
        qacc = jp.where(warm.cost < smooth.cost, d.qacc_warmstart, d.qacc_smooth)
    d = d.replace(qacc=qacc)
    ctx = S.Context.create(m, d)
    if m.opt.iterations == 1:
        ctx = iterate(ctx)
    else:
        ctx = scan_while(running, iterate, ctx, m.opt.iterations)
    return d.tree_replace({"qfrc_constraint": ctx.qfrc_constraint, "qacc": ctx.qacc, "_impl.efc_force": ctx.efc_force})


@contextlib.contextmanager
def fixed_trip_solver() -> Iterator[None]:
    """While active (i.e. while MJX code is traced inside it), MJX's forward passes use
    `solve_fixed_trips` and `scan_while`; MJX's own functions are restored on exit."""
    check_mjx_version()
    saved = mjx_solver.solve, mjx_solver._while_loop_scan
    mjx_solver.solve, mjx_solver._while_loop_scan = solve_fixed_trips, scan_while
    try:
        yield
    finally:
        mjx_solver.solve, mjx_solver._while_loop_scan = saved
