"""What a compiled XLA program will do when it runs, read from its optimised HLO text.

Latency on a GPU comes from two things a program's text shows: loops whose trip count depends on
data (XLA:GPU copies the predicate of such a `while` to the host and waits, on every trip) and
branches (`conditional`, the same wait), and the number of kernels launched one after another.
`program_stats` counts them for a `jax.stages.Compiled`:

- `data_dependent_loops`: `while` instructions without a trip count XLA could prove
  (`known_trip_count` in their backend config), i.e. `lax.while_loop`s; `lax.scan` and
  `fori_loop` with static bounds get a known trip count;
- `conditionals`: `conditional` instructions (`lax.cond`, `lax.switch` with an unbatched
  predicate);
- `executed_ops`: instructions executed per call, each loop body counted as often as its known
  trip count says (a data-dependent loop's body `data_trips` times, by default once, so this is
  then a lower bound), a fusion
  counted as one, bookkeeping that launches nothing (parameters, constants, tuples,
  get-tuple-element, bitcasts) not counted. On a GPU each counted instruction is about one
  kernel launch, so this approximates the launches of one call;
- `instructions`: the program's size, every instruction of every computation once (fusions'
  insides included, loops' bodies once): what the compiler works through, so a proxy for its
  compile time (docs/performance.md "Compiles and evaluations").
"""

from __future__ import annotations

import re
from typing import Any

_HEADER = re.compile(r"^(ENTRY )?%([\w.\-]+) ")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%[\w.\-]+ = .*? ([a-z][\w\-]*)\(")
_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "partition-id", "replica-id"}


def _computations(text: str) -> tuple[dict[str, list[str]], str]:
    computations: dict[str, list[str]] = {}
    entry, current = "", None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header and line.rstrip().endswith("{"):
            current = header.group(2)
            computations[current] = []
            if header.group(1):
                entry = current
        elif line.startswith("}"):
            current = None
        elif current is not None:
            computations[current].append(line)
    return computations, entry


def _attribute(line: str, name: str) -> str | None:
    match = re.search(name + r"=%([\w.\-]+)", line)
    return match.group(1) if match else None


def program_stats(compiled: Any, data_trips: int = 1) -> dict[str, int]:
    """Loops, branches and executed-op count of a compiled program; see the module docstring.
    `data_trips`: the trips a data-dependent loop is counted for (a chunk program whose length
    is an argument: the length it is called with)."""
    text = compiled.as_text() if hasattr(compiled, "as_text") else str(compiled)
    computations, entry = _computations(text)
    totals = {"loops": 0, "data_dependent_loops": 0, "conditionals": 0}
    memo: dict[str, int] = {}

    def executed(name: str) -> int:
        if name in memo:
            return memo[name]
        ops = 0
        for line in computations.get(name, ()):
            match = _INSTRUCTION.match(line)
            if not match:
                continue
            opcode = match.group(1)
            if opcode == "while":
                body, condition = _attribute(line, "body"), _attribute(line, "condition")
                trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
                totals["loops"] += 1
                if trips is None:
                    totals["data_dependent_loops"] += 1
                count = int(trips.group(1)) if trips else data_trips
                ops += count * (executed(body) + executed(condition)) + 1
            elif opcode == "conditional":
                totals["conditionals"] += 1
                branches = re.search(r"branch_computations=\{([^}]*)\}", line)
                names = re.findall(r"%([\w.\-]+)", branches.group(1)) if branches else []
                ops += 1 + max((executed(b) for b in names), default=0)
            elif opcode == "call":
                ops += executed(_attribute(line, "to_apply") or "")
            elif opcode not in _FREE:
                ops += 1
        memo[name] = ops
        return ops

    totals["executed_ops"] = executed(entry)
    totals["instructions"] = sum(1 for lines in computations.values() for line in lines if _INSTRUCTION.match(line))
    return totals
