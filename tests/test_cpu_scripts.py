"""benchmarks/fast_cpu.sh, the CPU evidence's script: each variant it names resolves on the Hopper
recipe it ablates and changes it, and a misspelt variant stops the script before anything trains.
No program is compiled here."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST_CPU = ROOT / "benchmarks" / "fast_cpu.sh"


def _variants() -> dict[str, str]:
    """fast_cpu.sh's `options` function: variant -> the `train.py` options it adds."""
    block = re.search(r"^options\(\) \{.*?^\}", FAST_CPU.read_text(), re.DOTALL | re.MULTILINE).group(0)
    return dict(re.findall(r'^\s*([\w-]+)\) echo "([^"]*)" ;;', block, re.MULTILINE))


def test_each_variant_resolves_on_the_delayed_hopper_recipe_and_changes_it():
    from mjx_pbac import cli
    from mjx_pbac.commands import _common

    variants = _variants()
    assert {"pbac", "sac", "bootdqn_p", "drnd", "ben", "pbac_raw_obs", "pbac_ln_plain", "pbac_ln_none"} <= set(variants)
    profile = _common.load("hopper_delayed_fast_cpu", None)
    resolved = {name: repr(cli.configure(profile, options.split(), f"fast_cpu.sh {name}")) for name, options in variants.items()}
    assert len(set(resolved.values())) == len(resolved), resolved  # none repeats another, pbac's the profile's own
    assert resolved["pbac"] == repr(cli.configure(profile, [], "the profile"))


def test_a_misspelt_variant_stops_the_script_before_anything_trains(tmp_path):
    runs = tmp_path / "runs"
    environment = {**os.environ, "TASKS": "hopper_delayed", "VARIANTS": "pbac pbac_ln_plian", "RUNS": str(runs), "LOGS": str(tmp_path / "logs")}
    done = subprocess.run(["bash", str(FAST_CPU)], cwd=ROOT, env=environment, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unknown variant pbac_ln_plian (pbac, sac, bootdqn_p, drnd, ben, pbac_raw_obs, pbac_ln_plain, pbac_ln_none)" in done.stderr
    assert not runs.exists() and not (tmp_path / "logs").exists()  # the valid pbac before it did not start
