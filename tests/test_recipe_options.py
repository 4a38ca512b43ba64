"""The recipe options beyond the paper (docs/design.md "Recipe options beyond the paper"):
observation normalisation, the hidden layers' LayerNorm, AdamW's weight decay, the discount as a
knob. Each is checked against an independent computation (numpy's moments, optax's AdamW, the
paper's network), and a run with them off is the paper's run, bit for bit."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
import optax
import pytest

from mjx_pbac import algos, cli, normalization
from mjx_pbac.algos import base, pbac
from mjx_pbac.config import RunConfig, TrainConfig, expand_members
from mjx_pbac.loop import make_trainer, member_inputs
from mjx_pbac.networks import MLP
from tests.probe_envs import CountingEnv

SMALL = pbac.Config(num_critics=3, hidden_sizes=(8,))


# -- observation normalisation ------------------------------------------------------------------


def test_merged_moments_are_the_moments_of_every_observation_merged():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (n, 4)).astype(np.float32) for n in (1, 7, 64, 5)]
    moments = normalization.init(4)
    for batch in batches:
        moments = normalization.update(moments, jp.asarray(batch))
    every = np.concatenate(batches)
    assert float(moments.count) == len(every) == 77
    np.testing.assert_allclose(moments.mean, every.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(moments.var, every.var(axis=0), rtol=1e-4)  # population variance (ddof 0)


def test_normalize_standardises_clips_and_passes_through_without_moments():
    moments = normalization.RunningMoments(count=jp.float32(10), mean=jp.array([1.0, -2.0]), var=jp.array([4.0, 0.0]))
    obs = jp.array([[5.0, -2.0], [1.0, 1e-3], [-1e6, -2.0]])
    # (5 - 1) / sqrt(4 + 1e-8) = 2; a constant feature maps its value to 0 and anything else by
    # 1 / sqrt(1e-8) = 1e4 (1e-3 -> 10, at the clip); -1e6 is clipped to -10.
    np.testing.assert_allclose(normalization.normalize(moments, obs), [[2.0, 0.0], [0.0, 10.0], [-10.0, 0.0]], rtol=1e-6)
    assert normalization.normalize(None, obs) is obs


class AffineObs(CountingEnv):
    """CountingEnv whose observations are scale * obs + shift."""

    def __init__(self, scale: float, shift: float):
        super().__init__(episode_length=7)
        self.scale, self.shift = scale, shift

    def reset(self, rng):
        state = super().reset(rng)
        return state.replace(obs=self.scale * state.obs + self.shift)

    def step(self, state, action):
        state = super().step(state, action)
        return state.replace(obs=self.scale * state.obs + self.shift)


def _normalizing_run(env, normalize: bool):
    train = TrainConfig(
        env="probe", total_steps=128, num_envs=4, batch_size=8, updates_per_step=2, buffer_size=256,
        warmup_steps=32, chunk_steps=32, eval_interval=32, eval_episodes=2, checkpoint_interval=32,
        normalize_observations=normalize,
    )
    trainer = make_trainer(train, env, pbac.make(SMALL, env.observation_size, env.action_size), donate=False)
    state = trainer.init(*member_inputs([(0, SMALL)]))
    state, _ = trainer.warmup_chunk(state)
    return trainer, state


def test_normalised_learning_does_not_see_the_observations_affine_scale():
    """With normalisation the networks see the same inputs whatever affine map the env applies to
    its observations (the moments follow the map), so training from the same seed takes the same
    steps; without it, it does not."""
    results = {}
    for scale, shift in ((1.0, 0.0), (30.0, -50.0)):
        trainer, state = _normalizing_run(AffineObs(scale, shift), normalize=True)
        warm = jax.device_get(state)
        # The warm-up chunk merged exactly the observations it stored: the buffer's first rows.
        stored = np.asarray(warm.buffer.data.obs[0, :32])
        assert float(warm.obs_moments.count[0]) == 32
        np.testing.assert_allclose(warm.obs_moments.mean[0], stored.mean(axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(warm.obs_moments.var[0], stored.var(axis=0), rtol=1e-4, atol=1e-5)
        state, _ = trainer.train_chunk(state)
        results[scale] = jax.device_get(state.agent.actor_params)
        returns = trainer.evaluate(state)["returns"]
        assert np.all(np.isfinite(returns))
    trainer, state = _normalizing_run(AffineObs(30.0, -50.0), normalize=False)
    assert state.obs_moments is None
    state, _ = trainer.train_chunk(state)
    raw = jax.device_get(state.agent.actor_params)

    def largest_difference(a, b):
        return max(jax.tree.leaves(jax.tree.map(lambda x, y: float(np.max(np.abs(x - y))), a, b)))

    # 16 Adam steps of lr 3e-4 move a parameter by up to ~5e-3: raw inputs 30x larger change
    # them by that much (6e-3 when written), normalised ones by float rounding only (7e-9).
    assert largest_difference(results[1.0], results[30.0]) < 1e-3 * largest_difference(results[1.0], raw)


# -- LayerNorm ----------------------------------------------------------------------------------


def test_affine_layer_norm_adds_a_scale_and_bias_that_start_as_the_papers_and_none_drops_it():
    x = jax.random.normal(jax.random.key(1), (5, 6))
    key = jax.random.key(0)
    plain, affine, none = (MLP((16, 16), 3, layer_norm=choice) for choice in ("plain", "affine", "none"))
    params = {name: net.init(key, x) for name, net in (("plain", plain), ("affine", affine), ("none", none))}
    names = {name: {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(tree)} for name, tree in params.items()}
    assert names["plain"] == names["none"] and not any("LayerNorm" in n for n in names["plain"])
    assert sorted(n for n in names["affine"] if "LayerNorm" in n) == [
        "['params']['LayerNorm_0']['bias']", "['params']['LayerNorm_0']['scale']",
        "['params']['LayerNorm_1']['bias']", "['params']['LayerNorm_1']['scale']",
    ]
    # Same Dense draws; scale 1 and bias 0 at initialisation: the paper's network, exactly.
    np.testing.assert_array_equal(affine.apply(params["affine"], x), plain.apply(params["plain"], x))
    assert not np.allclose(none.apply(params["none"], x), plain.apply(params["plain"], x))


# -- AdamW --------------------------------------------------------------------------------------


def test_weight_decay_makes_the_step_adamws_and_zero_leaves_adams():
    params = {"w": jp.array([[1.0, -2.0], [0.5, 3.0]]), "b": jp.array([0.1, -0.1])}

    def objective(p):
        return jp.sum(jp.square(p["w"] @ jp.array([1.0, 2.0]) + p["b"])), None

    lr, decay = 1e-2, 0.1
    state = base.adam_state(params, lr)
    stepped, _, _, _ = base.gradient_step(objective, params, state, jp.float32(decay))
    reference = optax.adamw(lr, weight_decay=decay)
    updates, _ = reference.update(jax.grad(lambda p: objective(p)[0])(params), reference.init(params), params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), stepped, optax.apply_updates(params, updates))
    plain, _, _, _ = base.gradient_step(objective, params, state)
    zero, _, _, _ = base.gradient_step(objective, params, state, jp.float32(0.0))
    jax.tree.map(np.testing.assert_array_equal, plain, zero)
    # Only a program with a non-zero decay somewhere holds the decay's arithmetic.
    assert base.weight_decay_rule(SMALL)(SMALL) is None
    rule = base.weight_decay_rule(base.stack_configs([SMALL, dataclasses.replace(SMALL, weight_decay=0.1)]))
    assert rule(SMALL) == SMALL.weight_decay


# -- the options as options -----------------------------------------------------------------------


def test_the_discount_and_weight_decay_are_knobs_of_every_algorithm_and_checked():
    for name in algos.NAMES:
        assert {"gamma", "weight_decay"} <= set(algos.sweepable(name)), name
        assert "layer_norm" not in algos.sweepable(name)  # a shape: one per program
    config = dataclasses.replace(RunConfig(), train=dataclasses.replace(TrainConfig(), sweep=("gamma=0.97,0.99", "weight_decay=0,0.1")))
    members = expand_members(config)
    assert [(m.config.gamma, m.config.weight_decay) for m in members] == [(0.97, 0.0), (0.97, 0.1), (0.99, 0.0), (0.99, 0.1)]
    for bad, message in (
        (dict(weight_decay=-0.1), "weight_decay must lie in [0, 1)"),
        (dict(layer_norm="batch"), "layer_norm must be 'plain' or 'affine' or 'none', got 'batch'"),
        (dict(gamma=1.0), "gamma must lie in [0, 1)"),
    ):
        with pytest.raises(ValueError) as refused:
            pbac.Config(**bad)
        assert message in str(refused.value)
    with pytest.raises(ValueError, match="cannot sweep 'layer_norm' of pbac"):
        expand_members(dataclasses.replace(config, train=dataclasses.replace(config.train, sweep=("layer_norm=plain,affine",))))


# -- where the options are on (docs/design.md "Recipe options beyond the paper") ----------------

# Profiles whose networks learn LayerNorm's scale and bias, in the sections they set (pbac, sac,
# bootdqn_p): hopper_delayed's CPU evidence, taken to its GPU recipes and to Humanoid's recipe
# (the hopper delayed recipe per seed) and its GPU recipes; the Ant ones keep plain, as on
# ant_delayed on the CPU (docs/evidence/ant-delayed.md).
AFFINE = {
    "hopper_delayed_fast_cpu", "hopper_delayed_fast", "hopper_very_delayed_fast",
    "humanoid_fast_cpu", "humanoid_fast", "humanoid_delayed_fast",
}
NORMALISED = {"hopper_delayed_fast_cpu", "hopper_fast_cpu", "ant_delayed_fast_cpu", "humanoid_fast_cpu"} | {
    f"{robot}{task}_fast" for robot in ("ant", "hopper", "humanoid") for task in ("", "_delayed", "_very_delayed")
} - {"humanoid_very_delayed_fast"}


def test_each_profile_turns_on_the_recipe_options_docs_design_says_and_no_others():
    from mjx_pbac.commands import _common
    from mjx_pbac.config import PROFILES_DIR

    names = sorted(path.stem for path in PROFILES_DIR.glob("*.toml"))
    assert set(names) >= AFFINE | NORMALISED
    for name in names:
        config = _common.load(name, None)
        assert config.train.normalize_observations == (name in NORMALISED), name
        for algo in ("pbac", "sac", "bootdqn_p", "drnd", "ben", "td3"):
            section = getattr(config, algo)
            wanted = "affine" if name in AFFINE and algo in ("pbac", "sac", "bootdqn_p", "drnd", "ben") else "plain"
            assert (section.layer_norm, section.gamma, section.weight_decay) == (wanted, 0.99, 0.0), (name, algo)


RECIPE_ALGOS = ("pbac", "sac", "bootdqn_p", "drnd", "ben")


def test_every_recipe_profile_runs_every_algorithm_at_its_sizes():
    """A like-for-like comparison: every `_fast` and `_fast_cpu` profile has a section for every
    algorithm, every network at PBAC's widths (DRND's predictor and targets: three hidden layers of
    that width), K equal wherever there is an ensemble, the same LayerNorm and learning rates
    (DRND's predictor: its own 1e-4 scaled as the others). The envs, batch and updates per step
    are the profile's, shared by every algorithm."""
    import tomllib

    from mjx_pbac.config import PROFILES_DIR

    recipes = sorted(PROFILES_DIR.glob("*_fast.toml")) + sorted(PROFILES_DIR.glob("*_fast_cpu.toml"))
    assert len(recipes) >= 16
    for path in recipes:
        table = tomllib.loads(path.read_text())
        missing = [algo for algo in RECIPE_ALGOS if algo not in table]
        assert not missing, f"{path.name} has no section for {missing}"
        pbac = table["pbac"]
        width = pbac["hidden_sizes"]
        for algo in RECIPE_ALGOS:
            section = table[algo]
            assert section["hidden_sizes"] == width, (path.name, algo)
            assert section.get("layer_norm", "plain") == pbac.get("layer_norm", "plain"), (path.name, algo)
            for rate in ("critic_lr", "actor_lr", "alpha_lr"):
                if algo in ("pbac", "sac", "drnd") or rate != "alpha_lr":
                    assert section[rate] == pbac[rate], (path.name, algo, rate)
            if algo in ("bootdqn_p", "drnd", "ben"):
                assert section["num_critics"] == pbac["num_critics"], (path.name, algo)
        drnd = table["drnd"]
        assert drnd["predictor_hidden_sizes"] == [width[0]] * 3, path.name
        assert drnd["predictor_lr"] == pytest.approx(1e-4 * pbac["critic_lr"] / 3e-4, rel=0.02), path.name


# Each GPU profile and the CPU recipe whose per-seed fields it keeps; a robot's task without a recipe
# of its own takes its robot's (the paper's per-task settings aside).
GPU_RECIPES = {
    "reacher_hard_fast": "reacher_hard_fast_cpu",
    "cartpole_swingup_sparse_fast": "cartpole_swingup_sparse_fast_cpu",
    "ball_in_cup_catch_fast": "ball_in_cup_catch_fast_cpu",
    "hopper_fast": "hopper_fast_cpu",
    "hopper_delayed_fast": "hopper_delayed_fast_cpu",
    "hopper_very_delayed_fast": "hopper_delayed_fast_cpu",
    "ant_delayed_fast": "ant_delayed_fast_cpu",
    "ant_fast": "ant_delayed_fast_cpu",
    "ant_very_delayed_fast": "ant_delayed_fast_cpu",
    "humanoid_fast": "humanoid_fast_cpu",
    "humanoid_delayed_fast": "humanoid_fast_cpu",
}
PER_TASK = ("bootstrap_rate", "posterior_sampling_rate", "prior_variance", "prior_scale")
"""The paper's per-task settings (Table 5 and the baselines' tables): each profile takes its task's."""


@pytest.mark.parametrize("gpu, recipe", sorted(GPU_RECIPES.items()))
def test_each_gpu_profile_is_its_cpu_recipe_per_seed(gpu, recipe):
    """Learning per env step does not depend on the device, so a GPU profile is a recipe proven on
    the CPU: the same envs per seed, batch, updates per vector step, warm-up, budget, observation
    normalisation and every algorithm's section (sizes, LayerNorm, rates), with the paper's
    per-task settings of its own task; it spends the GPU on 10 seeds in one program. The buffer is
    the recipe's too: cartpole's 1 M transitions per seed keep the last 1 M of its 2.46 M steps,
    as the recipe learned with."""
    from mjx_pbac.commands import _common

    fast, cpu = _common.load(gpu, None), _common.load(recipe, None)
    paper = _common.load(fast.train.env, None)
    assert fast.train.env == gpu.removesuffix("_fast")
    assert fast.train.num_seeds == 10
    own = {"env", "num_seeds", "tasks", "task_overrides"}  # the robot's other tasks: the next test
    assert {k: v for k, v in dataclasses.asdict(fast.train).items() if k not in own} == {
        k: v for k, v in dataclasses.asdict(cpu.train).items() if k not in own
    }, (gpu, recipe)
    for algo in RECIPE_ALGOS:
        got, want, task = (dataclasses.asdict(getattr(c, algo)) for c in (fast, cpu, paper))
        assert {k: v for k, v in got.items() if k not in PER_TASK} == {k: v for k, v in want.items() if k not in PER_TASK}, (gpu, algo)
        assert {k: got[k] for k in PER_TASK if k in got} == {k: task[k] for k in PER_TASK if k in task}, (gpu, algo)


# The GPU profiles that train their robot's other tasks as members of the same program, and those tasks.
GPU_TASKS = {
    "ant_delayed_fast": ("ant", "ant_very_delayed"), "hopper_delayed_fast": ("hopper_very_delayed",), "humanoid_delayed_fast": ("humanoid",),
}


@pytest.mark.parametrize("algo", ["pbac", "bootdqn_p"])
def test_a_gpu_profile_trains_its_robots_other_tasks_each_with_its_own_profiles_values(algo, capsys):
    """A GPU has width to spare: a robot's delayed `_fast` profile trains each other task of the
    robot whose own `_fast` profile can share its program (the same sizes and budget) as members
    of it, and each such task takes the per-task values of that profile (not of the paper's
    profile of the task, whose sizes differ). The other `_fast` profiles train their task alone;
    hopper_fast (another budget and LayerNorm) is no member of hopper_delayed_fast."""
    from mjx_pbac.commands import _common
    from mjx_pbac.config import merge_task_configs, profile_names

    fast = [name for name in profile_names() if name.endswith("_fast")]
    for name in fast:
        config = _common.load(name, None)
        shared = []
        for other in fast:
            task = _common.load(other, None).train.env
            if other == name or task.split("_")[0] != config.train.env.split("_")[0]:
                continue
            candidate = dataclasses.replace(config, train=dataclasses.replace(config.train, tasks=(task,), task_overrides=()))
            own = _common.load(other, None)
            try:
                merge_task_configs(candidate, {task: dataclasses.replace(own, train=dataclasses.replace(own.train, env=candidate.train.env, tasks=(task,)))})
            except ValueError:
                continue
            shared.append(task)
        if name in GPU_TASKS:
            assert config.train.tasks == GPU_TASKS[name] and sorted(shared) == sorted(GPU_TASKS[name]), (name, shared)
        else:  # a task that is a member of its robot's delayed profile also has a profile of its own, alone
            assert config.train.tasks == () and not (shared and f"{config.train.env.split('_')[0]}_delayed_fast" not in GPU_TASKS), name
    assert "hopper" not in GPU_TASKS["hopper_delayed_fast"]

    for name, tasks in GPU_TASKS.items():
        options = ["--algo", algo, "--seeds", "2"]
        config = _common.with_task_profiles(cli.configure(_common.load(name, None), options, "p"), options, "p", profile=name)
        assert config.train.task_names == (name.removesuffix("_fast"), *tasks) and config.train.num_seeds == 2
        section = dataclasses.asdict(config.algorithm_config)
        expected = []
        for task in tasks:
            own = dataclasses.asdict(_common.load(f"{task}_fast", None).algorithm_config if algo == "pbac" else getattr(_common.load(f"{task}_fast", None), algo))
            expected += [f"{task}:{k}={own[k]}" for k in PER_TASK if k in own and own[k] != section[k]]
        assert sorted(config.train.task_overrides) == sorted(expected), (name, algo)
    ant = _common.with_task_profiles(cli.configure(_common.load("ant_delayed_fast", None), [], "p"), [], "p", profile="ant_delayed_fast")
    assert "ant_very_delayed:prior_variance=5.0" in ant.train.task_overrides  # Table 5: sigma0^2 = 5 on ant very delayed
    assert "per-task settings from the tasks' profiles" in capsys.readouterr().err
