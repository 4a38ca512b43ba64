"""Tools that measure the environments of `envs/`; none of them is an environment, and no env imports them.

- comparisons with reference implementations no one here wrote, on the same states:
  `gymnasium_fidelity` (Gymnasium's own MuJoCo envs), `dm_control_fidelity` (DM Control's suite),
  `metaworld_fidelity` (Meta-World's own envs, through the records of `metaworld_reference`);
- `metaworld_reference`: Meta-World's recorder, which records its own envs state by state; it imports
  only numpy, mujoco and metaworld, so it also runs alone, copied into a venv with another MuJoCo
  (`benchmarks/metaworld_reference_mujoco33.sh`);
- `benchmark`: the env throughput benchmark behind `train.py bench-env`;
- `metaworld_contacts`: the offline contact-pair measurement in Meta-World's own envs that chose
  the pairs `envs.metaworld_model` keeps (`envs/metaworld_kept_pairs.json`), with its checks of the
  pruning and of the collision stand-ins.

Like the rest of `envs/`, they import nothing from `mjx_pbac/`.
"""
