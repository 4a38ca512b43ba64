#!/usr/bin/env bash
# The test suite's device-sensitive tests on the GPU, as one pytest command: every algorithm's training chunk (PBAC's and the others') compiles once, stays on the device and has no
# data-dependent loop or branch; the env step's solve has none either and equals MJX's own; a run
# resumed from its checkpoint equals the uninterrupted one bit for bit; a run on one device has no
# mesh. Written to $OUT: device.txt, log.txt, pytest.txt (the summary) and junit.xml.
#
#   OUT=<dir> COMMIT=<hash> bash benchmarks/gpu/device_tests.sh   # on a GPU machine
#   DRY_RUN=1 bash benchmarks/gpu/device_tests.sh                 # on a CPU: collects the same tests (they run in the suite)
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/setup.sh
TESTS=(
  "tests/test_loop.py::test_every_algorithms_chunk_compiles_once_stays_on_device_and_never_branches"
  "tests/test_chain.py::test_state_structure_is_fixed_and_step_traces_once"
  "tests/test_mjx_solver.py::test_training_env_step_has_no_data_dependent_loop_or_branch"
  "tests/test_mjx_solver.py::test_fixed_trip_solve_equals_mjx_while_loop_on_ant_contacts"
  "tests/test_runner.py::test_resume_after_interrupt_equals_uninterrupted_run"
  "tests/test_devices.py::test_a_run_on_one_device_has_no_mesh_and_refuses_devices_it_does_not_see"
)
MODE=()
[ "${DRY_RUN:-0}" = 1 ] && MODE=(--collect-only)
bounded device_tests $(( $(seconds_left) - 15 )) python3 -m pytest -q -p no:cacheprovider "${MODE[@]}" \
  --junitxml="$OUT/junit.xml" "${TESTS[@]}"
grep -E "passed|failed|error|tests? collected" "$OUT/log.txt" | tail -3 > "$OUT/pytest.txt"
cat "$OUT/pytest.txt"
