"""JAX-native environments for mjx-pbac: MJX locomotion (Gymnasium v4 semantics), DM Control's
sparse tasks in MJX (DM Control semantics), Meta-World's seven sparse tasks in MJX (Meta-World
3.0.0's semantics, `mw_*`) and two chain probes (the continuous chain and its
deep-sea variant, `deep_chain` and `deep_chain_<L>`).

`envs.make(name, **overrides)` builds a registered env; `envs.registered_names()` lists them.
The envs are Brax `Env`s and know nothing of the trainer in `mjx_pbac/`.
"""

import contextlib as _contextlib
import io as _io

# mujoco.mjx prints "Failed to import warp: ..." on import when the optional mujoco_warp backend
# (GPU-only, unused here) is absent; drop those lines and pass on anything else it prints.
with _contextlib.redirect_stdout(_io.StringIO()) as _captured:
    from mujoco import mjx as _mjx  # noqa: F401
for _line in _captured.getvalue().splitlines():
    if not _line.startswith(("Failed to import warp", "Failed to import mujoco_warp")):
        print(_line)

from envs.base import Env, MjxEnv, State  # noqa: E402
from envs.chain import ChainConfig, ContinuousChain  # noqa: E402
from envs.deep_chain import DeepChain, DeepChainConfig  # noqa: E402
from envs.dm_control import BallInCupCatch, CartpoleSwingupSparse, DMControlConfig, ReacherHard  # noqa: E402
from envs.locomotion import Ant, Hopper, Humanoid, LocomotionConfig  # noqa: E402
from envs.metaworld import TASKS as _METAWORLD_TASKS, MetaWorldConfig  # noqa: E402
from envs.registry import config_of, describe, make, make_family, register, register_family, registered_names  # noqa: E402
from envs.wrappers import BatchedEnv, EpisodeAutoReset, wrap_for_training  # noqa: E402

register("ant", Ant, "Gymnasium Ant-v4, dense reward")
register("ant_delayed", Ant, "Ant, reward 1[x >= 0] v - 0.5 |a|^2", delay_threshold=0.0)
register("ant_very_delayed", Ant, "Ant, reward 1[x >= 2] v - 0.5 |a|^2", delay_threshold=2.0)
register("hopper", Hopper, "Gymnasium Hopper-v4, dense reward")
register("hopper_delayed", Hopper, "Hopper, reward 1[x >= 0] v - 0.001 |a|^2", delay_threshold=0.0)
register(
    "hopper_very_delayed", Hopper, "Hopper, reward 1[x >= 1] v - 0.001 |a|^2", delay_threshold=1.0
)
register("humanoid", Humanoid, "Gymnasium Humanoid-v4, dense reward")
register("humanoid_delayed", Humanoid, "Humanoid, reward 1[x >= 0] v - 0.1 |a|^2", delay_threshold=0.0)
register(
    "humanoid_very_delayed",
    Humanoid,
    "Humanoid, reward 1[x >= 1] v - 0.1 |a|^2 (beyond the paper)",
    delay_threshold=1.0,
)
register("cartpole_swingup_sparse", CartpoleSwingupSparse, "DM Control cartpole swing-up, sparse reward (paper Table 1)")
register("ball_in_cup_catch", BallInCupCatch, "DM Control ball-in-cup catch, sparse reward (paper Table 1)")
register("reacher_hard", ReacherHard, "DM Control reacher hard (target radius 0.015), sparse reward (paper Table 1)")
for _name, _task in _METAWORLD_TASKS.items():
    register(_name, _task, f"Meta-World {_task.metaworld_name}, hidden random goal, reward = success (paper Table 2)")
register("chain", ContinuousChain, "Continuous chain: r_d near x = 0, r_g near x = L (our deep-exploration probe)")
register(
    "deep_chain", DeepChain, "Deep-sea chain: a fixed random action sign per cell; no constant action reaches the goal"
)
register_family(
    "deep_chain_", DeepChain, "length", "Deep-sea chain of length L = {value} (the maze of deep_chain)", placeholder="L"
)

__all__ = [
    "Ant",
    "BatchedEnv",
    "ChainConfig",
    "ContinuousChain",
    "DMControlConfig",
    "DeepChain",
    "DeepChainConfig",
    "Env",
    "EpisodeAutoReset",
    "Hopper",
    "Humanoid",
    "LocomotionConfig",
    "MetaWorldConfig",
    "MjxEnv",
    "State",
    "config_of",
    "describe",
    "make",
    "make_family",
    "register",
    "register_family",
    "registered_names",
    "wrap_for_training",
]

from envs import gym_api  # noqa: E402  (Gymnasium ids "mjx_pbac/<name>-v0"; registers, compiles nothing)

gym_api.register_gymnasium_envs()
