"""`mjx_pbac.hlo.program_stats` on programs whose loops, branches and trip counts are known."""

import jax
import jax.numpy as jp

from mjx_pbac.hlo import program_stats


def _stats(fn, *args):
    return program_stats(jax.jit(fn).lower(*args).compile())


def test_counts_data_dependent_loops_branches_and_weights_ops_by_trip_count():
    def with_both(x):
        def body(c, _):
            c = jax.lax.while_loop(lambda v: v.sum() < 100, lambda v: 2 * v + 1, c)  # data-dependent
            c = jax.lax.cond(c[0] > 3, lambda v: v + 1, lambda v: v - 1, c)  # a branch
            return jp.sin(c), None

        return jax.lax.scan(body, x, None, length=7)[0]

    stats = _stats(with_both, jp.ones(4))
    assert stats["loops"] == 2 and stats["data_dependent_loops"] == 1 and stats["conditionals"] == 1

    def scan_of(length):
        return lambda x: jax.lax.scan(lambda c, _: (jp.sin(c) @ jp.ones((4, 4)), None), x, None, length=length)[0]

    plain = _stats(scan_of(7), jp.ones(4))
    assert plain == {**plain, "loops": 1, "data_dependent_loops": 0, "conditionals": 0}
    # The body runs once per trip: 14 trips execute about twice the ops of 7.
    longer = _stats(scan_of(14), jp.ones(4))["executed_ops"]
    assert 1.8 < longer / plain["executed_ops"] < 2.2
    # ... while the program's size does not grow with the trips; unrolled, it does.
    assert _stats(scan_of(14), jp.ones(4))["instructions"] == plain["instructions"]

    def unrolled(x):
        return jax.lax.scan(lambda c, _: (jp.sin(c) @ jp.ones((4, 4)), None), x, None, length=7, unroll=7)[0]

    assert _stats(unrolled, jp.ones(4))["instructions"] > plain["instructions"]
