"""Typed, frozen configuration of a training run, and the named presets in `profiles/`.

A run is a `RunConfig`: what to train on and how long (`TrainConfig`), which algorithm, and each
algorithm's hyperparameters (`PBACConfig`, SPEC section 2; the baselines' sections, SPEC 3).
Every field has a docstring, which `train.py --help` shows. A profile (`profiles/NAME.toml`) is a
partial `RunConfig` written as TOML tables `[train]`, `[pbac]` and one per baseline (`[sac]`,
`[bootdqn_p]`, `[drnd]`, `[ben]`); `load_profile` checks every key and value against these
dataclasses, `load_profile_file` does the same for a TOML file anywhere (profile names are plain
names, never paths), and `list_profiles` lists them with the reason a broken one does not load.

Every value is checked where its dataclass is built, so a value from the command line, a
profile, a config.json or a sweep is refused alike, with a one-line ValueError that names the
field, the value and what is valid: floats must be finite, ints at most 2**31 - 1 (they become
int32 seeds, shapes and counters on the device).

Derived sizes (iterations per chunk, where evaluation falls) live in `Schedule`, computed from the
config and never written back into it.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import math
import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Literal

PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"

INT32_MAX = 2**31 - 1
"""The largest seed, size or counter the device holds: seeds, shapes and step counters are int32."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _is_finite(value: int | float) -> bool:
    """math.isfinite, with an int too large for a float (10**400) counted as not finite."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _not_finite(name: str, value: Any) -> str:
    return f"{name} must be a finite number (not inf or nan), got {value}"


@functools.cache
def _number_fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(float fields, int fields, tuple-of-int fields) of a config dataclass, by annotation."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    floats = tuple(name for name in names if hints[name] is float)
    ints = tuple(name for name in names if hints[name] is int)
    int_tuples = tuple(name for name in names if hints[name] == tuple[int, ...])
    return floats, ints, int_tuples


def _check_numbers(config: Any) -> None:
    """Every float field of `config` is finite, and every int field (and every int of a tuple of
    ints, e.g. widths) at most 2**31 - 1: inf and nan arrive as easily from a TOML profile
    (`inf`, `nan`), a JSON config or an overflowing literal (`1e999`) as from code, and ints
    become int32 seeds, shapes and counters on the device. Called first by every section's
    `__post_init__`, so the range checks that follow never compare with a nan."""
    floats, ints, int_tuples = _number_fields(type(config))
    for name in floats:
        value = getattr(config, name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not _is_finite(value):
            raise ValueError(_not_finite(name, value))
    for name in ints:
        value = getattr(config, name)
        if isinstance(value, int) and value > INT32_MAX:
            raise ValueError(f"{name} must be <= 2**31 - 1 = {INT32_MAX} (an int32 on the device), got {value}")
    for name in int_tuples:
        values = getattr(config, name)
        if any(isinstance(v, int) and v > INT32_MAX for v in values):
            raise ValueError(f"{name} must hold values <= 2**31 - 1 = {INT32_MAX} (int32 shapes on the device), got {values}")


def _check_actor_critic(config: Any) -> None:
    """The checks every actor-critic config shares: widths, discount, Polyak rate."""
    widths = config.hidden_sizes
    _require(len(widths) >= 1 and all(h >= 1 for h in widths), f"hidden_sizes must be positive widths, got {widths}")
    _require(0.0 <= config.gamma < 1.0, f"gamma must lie in [0, 1), got {config.gamma}")
    _require(0.0 < config.tau <= 1.0, f"tau must lie in (0, 1], got {config.tau}")


def _check_positive(config: Any, *names: str) -> None:
    for name in names:
        _require(getattr(config, name) > 0, f"{name} must be > 0, got {getattr(config, name)}")


@dataclasses.dataclass(frozen=True)
class PBACConfig:
    """PBAC's hyperparameters (SPEC 2.1-2.5; paper Tables 5-7)."""

    num_critics: int = 10
    """K: critics in the ensemble and heads of the actor."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (each followed by LayerNorm and CReLU, which doubles it)."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak rate of the target critics."""
    bootstrap_rate: float = 0.05
    """kappa: each (critic, sample) pair is masked out with this probability, drawn per gradient step."""
    posterior_sampling_rate: int = 5
    """PSR: an instance redraws its active head every PSR env steps (and at every episode start)."""
    prior_variance: float = 1.0
    """sigma0^2 of the coherence term."""
    loss_form: Literal["reference", "paper"] = "reference"
    """Critic loss as the authors' code computes it, or as the paper prints it (SPEC 2.2)."""
    use_diversity: bool = True
    """Keep the diversity (masked TD) term of the critic loss."""
    use_coherence: bool = True
    """Keep the coherence (pull to the ensemble-mean target) term."""
    use_propagation: bool = True
    """Keep the propagation (log ensemble variance) term."""
    actor: Literal["soft", "deterministic"] = "soft"
    """Squashed-Gaussian heads with a learned temperature, or tanh heads with no entropy."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critic ensemble (one optimiser over all K)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor (trunk and heads)."""
    alpha_lr: float = 3e-4
    """Adam learning rate of log alpha."""
    init_log_alpha: float = 0.0
    """Initial log temperature."""
    prior_scale: float = 0.0
    """beta: beyond the paper, each critic gets a fixed random prior network as BootDQN-P's,
    Q_k = f_k + beta p_k; 0 (the paper's PBAC) builds none."""

    def __post_init__(self) -> None:
        _check_numbers(self)
        _require(self.num_critics >= 2, f"num_critics must be >= 2 (the loss needs an ensemble variance), got {self.num_critics}")
        _require(self.prior_scale >= 0, f"prior_scale must be >= 0, got {self.prior_scale}")
        _check_actor_critic(self)
        _require(0.0 <= self.bootstrap_rate < 1.0, f"bootstrap_rate must lie in [0, 1), got {self.bootstrap_rate}")
        _require(self.posterior_sampling_rate >= 1, f"posterior_sampling_rate must be >= 1, got {self.posterior_sampling_rate}")
        _require(self.prior_variance > 0, f"prior_variance must be > 0, got {self.prior_variance}")
        _require(self.loss_form in ("reference", "paper"), f"loss_form must be 'reference' or 'paper', got {self.loss_form!r}")
        _require(self.actor in ("soft", "deterministic"), f"actor must be 'soft' or 'deterministic', got {self.actor!r}")
        _require(
            self.use_diversity or self.use_coherence or self.use_propagation,
            "at least one of use_diversity, use_coherence, use_propagation must be true",
        )
        _check_positive(self, "critic_lr", "actor_lr", "alpha_lr")


@dataclasses.dataclass(frozen=True)
class SACConfig:
    """SAC as the paper's baseline (SPEC 3): K = 2 critics, the min over them for targets and
    actor, a learned temperature, Huber TD loss; PBAC's networks and optimiser settings."""

    num_critics: int = 2
    """Critics whose minimum forms targets and the actor's objective."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (LayerNorm + CReLU after each)."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak rate of the target critics."""
    huber_delta: float = 1.0
    """Huber loss threshold of the TD error (the paper applied Huber to the baselines)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    alpha_lr: float = 3e-4
    """Adam learning rate of log alpha."""
    init_log_alpha: float = 0.0
    """Initial log temperature."""

    def __post_init__(self) -> None:
        _check_numbers(self)  # a DRNDConfig's own fields too
        _require(self.num_critics >= 1, f"num_critics must be >= 1, got {self.num_critics}")
        _check_actor_critic(self)
        _require(self.huber_delta > 0, f"huber_delta must be > 0, got {self.huber_delta}")
        _check_positive(self, "critic_lr", "actor_lr", "alpha_lr")


@dataclasses.dataclass(frozen=True)
class BootDQNPConfig:
    """BootDQN-P adapted to continuous control (SPEC 3): K critics Q_k = f_k + beta p_k with p_k a
    fixed random prior network, a deterministic K-head actor, bootstrap masks and posterior
    sampling as PBAC, Huber TD loss."""

    num_critics: int = 10
    """K: critics (each with its own fixed prior network) and actor heads."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (LayerNorm + CReLU after each)."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak rate of the target critics (the priors never change)."""
    bootstrap_rate: float = 0.05
    """kappa: each (critic, sample) pair is masked out with this probability per gradient step."""
    posterior_sampling_rate: int = 5
    """PSR: an instance redraws its active head every PSR env steps (and at every episode start)."""
    prior_scale: float = 5.0
    """beta: weight of the fixed prior network in Q_k = f_k + beta p_k."""
    huber_delta: float = 1.0
    """Huber loss threshold of the TD error."""
    critic_lr: float = 3e-4
    """Adam learning rate of the trainable critics f_k."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""

    def __post_init__(self) -> None:
        _check_numbers(self)
        _require(self.num_critics >= 1, f"num_critics must be >= 1, got {self.num_critics}")
        _check_actor_critic(self)
        _require(0.0 <= self.bootstrap_rate < 1.0, f"bootstrap_rate must lie in [0, 1), got {self.bootstrap_rate}")
        _require(self.posterior_sampling_rate >= 1, f"posterior_sampling_rate must be >= 1, got {self.posterior_sampling_rate}")
        _require(self.prior_scale >= 0, f"prior_scale must be >= 0, got {self.prior_scale}")
        _require(self.huber_delta > 0, f"huber_delta must be > 0, got {self.huber_delta}")
        _check_positive(self, "critic_lr", "actor_lr")


@dataclasses.dataclass(frozen=True)
class DRNDConfig(SACConfig):
    """SAC-DRND (SPEC 3; Yang et al. 2024): SAC as `SACConfig` with a distributional random
    network distillation bonus b(s', a') from N fixed random target networks and one trained
    predictor, added to the bootstrap of the critic target with weight sign * bonus_scale."""

    num_targets: int = 10
    """N: fixed random target networks g_n(s, a) whose mean and second moment define the bonus."""
    predictor_hidden_sizes: tuple[int, ...] = (256, 256, 256, 256)
    """Widths of the ReLU hidden layers of the predictor and of every target network."""
    embedding_size: int = 32
    """Output size of the predictor and the target networks."""
    predictor_lr: float = 1e-4
    """Adam learning rate of the predictor (trained on one random target per batch)."""
    bonus_mix: float = 0.9
    """Weight of the first bonus term, sum_j (f_j - mu_j)^2; the distributional term gets 1 - bonus_mix."""
    bonus_scale: float = 1.0
    """lambda: the bonus enters the target as sign * lambda * b(s', a')."""
    sign: Literal["penalty", "bonus"] = "penalty"
    """SPEC's drnd_sign: "penalty" subtracts lambda b(s', a') in the target as the reference
    pipeline does (a novelty penalty); "bonus" adds it (an exploration bonus)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _require(self.num_targets >= 2, f"num_targets must be >= 2 (the bonus needs their spread), got {self.num_targets}")
        widths = self.predictor_hidden_sizes
        _require(len(widths) >= 1 and all(h >= 1 for h in widths), f"predictor_hidden_sizes must be positive widths, got {widths}")
        _require(self.embedding_size >= 1, f"embedding_size must be >= 1, got {self.embedding_size}")
        _require(0.0 <= self.bonus_mix <= 1.0, f"bonus_mix must lie in [0, 1], got {self.bonus_mix}")
        _require(self.bonus_scale >= 0, f"bonus_scale must be >= 0, got {self.bonus_scale}")
        _require(self.sign in ("penalty", "bonus"), f"sign must be 'penalty' or 'bonus', got {self.sign!r}")
        _check_positive(self, "predictor_lr")


@dataclasses.dataclass(frozen=True)
class BENConfig:
    """BEN as the paper's Bayesian deep-ensemble version (SPEC 3): K - 1 heteroscedastic critics
    (mean, log-variance) fitted to a Gaussian Bellman target by a KL with bootstrap masks, and one
    deterministic critic regressed on their detached mean that alone trains a deterministic actor,
    which explores with N(0, action_noise^2) action noise."""

    num_critics: int = 10
    """K: K - 1 heteroscedastic critics plus the one deterministic critic."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (LayerNorm + CReLU after each)."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak rate of the heteroscedastic target critics."""
    bootstrap_rate: float = 0.05
    """kappa: each (critic, sample) pair of the ensemble's KL is masked out with this probability."""
    action_noise: float = 0.1
    """Standard deviation of the Gaussian noise added to the actor's action when exploring."""
    huber_delta: float = 1.0
    """Huber threshold of the deterministic critic's regression on the ensemble mean."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics (the ensemble and the deterministic one)."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""

    def __post_init__(self) -> None:
        _check_numbers(self)
        _require(self.num_critics >= 2, f"num_critics must be >= 2 (K - 1 heteroscedastic + 1 deterministic), got {self.num_critics}")
        _check_actor_critic(self)
        _require(0.0 <= self.bootstrap_rate < 1.0, f"bootstrap_rate must lie in [0, 1), got {self.bootstrap_rate}")
        _require(self.action_noise >= 0, f"action_noise must be >= 0, got {self.action_noise}")
        _require(self.huber_delta > 0, f"huber_delta must be > 0, got {self.huber_delta}")
        _check_positive(self, "critic_lr", "actor_lr")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """What to train on, for how long, and what a run writes (SPEC 2.5, 2.6)."""

    env: str = "ant_delayed"
    """Registered environment name (see `envs.registered_names()`)."""
    tasks: tuple[str, ...] = ()
    """More registered envs trained next to `env` as members of the same program (`--tasks`):
    tasks of one robot that differ only in reward constants, e.g. env ant with tasks
    ant_delayed ant_very_delayed. Each task gets its own members (sweep points x seeds)."""
    task_overrides: tuple[str, ...] = ()
    """TASK:NAME=VALUE sets a sweepable knob of the algorithm for the members of one task, e.g.
    ant_very_delayed:prior_variance=5.0 (the paper's per-task values; `train.py --tasks` fills
    them in from the tasks' profiles and prints them)."""
    env_overrides: tuple[str, ...] = ()
    """Env config overrides KEY=VALUE, e.g. delay_threshold=1.0 (checked against the env's config)."""
    seed: int = 0
    """Seed of the (first) member: initialisation, masks, exploration and env noise. The seeds
    seed..seed+num_seeds-1 must lie in [0, 2**31 - 1] (they are int32 on the device)."""
    num_seeds: int = 1
    """Independent seeds seed, seed+1, ... trained together as a vmapped axis (`--seeds N`)."""
    sweep: tuple[str, ...] = ()
    """Hyperparameter grids NAME=v1,v2,... over the algorithm's numeric knobs (`--sweep`),
    crossed with each other and with the seeds, all in one program; e.g. bootstrap_rate=0.01,0.1."""
    total_steps: int = 300_000
    """Env steps to train for, counted over all instances (warm-up included)."""
    num_envs: int = 1
    """Env instances stepped together; each vector step adds num_envs transitions."""
    batch_size: int = 256
    """Transitions per gradient step."""
    updates_per_step: int = 5
    """Gradient steps per vector env step (the paper: 5 with one env)."""
    buffer_size: int = 100_000
    """Replay capacity in transitions (a FIFO ring on the device)."""
    warmup_steps: int = 10_000
    """Env steps with uniform random actions and no updates before training."""
    chunk_steps: int = 1_000
    """Env steps per jitted chunk: metrics, the progress bar and interrupts act at this grain.
    Rounded up to a whole number of vector steps; the step counts below are rounded up to whole
    chunks (the run prints any such rounding and records it in config.json)."""
    eval_interval: int = 20_000
    """Env steps between evaluations (also at step 0 and at the end)."""
    eval_episodes: int = 10
    """Evaluation episodes, run in parallel with the mean-over-heads deterministic policy."""
    checkpoint_interval: int = 20_000
    """Env steps between checkpoints (one is also written at the end and on interrupt)."""
    visit_interval: int = 500
    """Env steps between recorded visited states (the first env instance's metrics, e.g. its
    x and y) in visits.jsonl, for exploration plots; 0 records none."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk."""
    run_dir: str = ""
    """Directory of this run's outputs; empty makes runs/<profile>-<env>-s<seed>-<time>."""
    tensorboard: bool = True
    """Write TensorBoard scalars (tensorboardX) under RUN_DIR/tb."""
    progress: bool = True
    """Show a progress bar on stderr."""
    matmul_precision: Literal["float32", "tensorfloat32", "bfloat16", "default"] = "float32"
    """Precision of float32 matrix products in every program of the run (networks and physics):
    float32 is full precision, as the authors' PyTorch (whose default is full float32) and the
    physics' fidelity need; "default" lets XLA choose (TF32 on recent NVIDIA GPUs, float32 on a
    CPU); tensorfloat32 and bfloat16 trade accuracy for speed on large batches (README)."""

    def __post_init__(self) -> None:
        _require(
            0 <= self.seed <= INT32_MAX,
            f"seed must lie in [0, 2**31 - 1] = [0, {INT32_MAX}] (seeds are int32 on the device), got {self.seed}",
        )
        _check_numbers(self)
        positive = ("num_seeds", "total_steps", "num_envs", "batch_size", "buffer_size", "chunk_steps", "eval_interval", "eval_episodes", "checkpoint_interval", "keep_checkpoints")
        for name in positive:
            _require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        _require(self.updates_per_step >= 0, f"updates_per_step must be >= 0, got {self.updates_per_step}")
        _require(self.warmup_steps >= 0, f"warmup_steps must be >= 0, got {self.warmup_steps}")
        _require(self.visit_interval >= 0, f"visit_interval must be >= 0, got {self.visit_interval}")
        _require(
            self.seed + self.num_seeds - 1 <= INT32_MAX,
            f"the seeds seed..seed+num_seeds-1 = {self.seed}..{self.seed + self.num_seeds - 1} must lie in "
            f"[0, 2**31 - 1] = [0, {INT32_MAX}] (seeds are int32 on the device); lower seed or num_seeds",
        )
        _require(
            self.warmup_steps < self.total_steps,
            f"warmup_steps ({self.warmup_steps}) must be < total_steps ({self.total_steps})",
        )
        _require(
            self.buffer_size >= self.num_envs,
            f"buffer_size ({self.buffer_size}) must hold at least one vector step ({self.num_envs})",
        )
        _require(
            self.buffer_size + self.num_envs <= INT32_MAX,
            f"buffer_size + num_envs ({self.buffer_size} + {self.num_envs}) must be <= 2**31 - 1 = {INT32_MAX}: "
            "the replay's int32 position and size reach it while a vector step is inserted",
        )
        parse_overrides(self.env_overrides)
        parse_sweep(self.sweep)
        _require(len(set(self.task_names)) == len(self.task_names), f"a task is named twice in env + tasks: {self.task_names}")
        parse_task_overrides(self.task_overrides, self.task_names)

    @property
    def task_names(self) -> tuple[str, ...]:
        """`env` followed by `tasks`: every task trained in this run."""
        return (self.env, *self.tasks)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One training run: `train` (env, budget, outputs), the algorithm to train (`algo`) and one
    section of hyperparameters per algorithm (only the selected one is used)."""

    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    algo: Literal["pbac", "sac", "bootdqn_p", "drnd", "ben"] = "pbac"
    """Algorithm: pbac (SPEC 2), or a baseline (SPEC 3): sac, bootdqn_p, drnd, ben."""
    pbac: PBACConfig = dataclasses.field(default_factory=PBACConfig)
    sac: SACConfig = dataclasses.field(default_factory=SACConfig)
    bootdqn_p: BootDQNPConfig = dataclasses.field(default_factory=BootDQNPConfig)
    drnd: DRNDConfig = dataclasses.field(default_factory=DRNDConfig)
    ben: BENConfig = dataclasses.field(default_factory=BENConfig)

    @property
    def algorithm_config(self) -> Any:
        """The hyperparameter section of the selected algorithm."""
        return getattr(self, self.algo)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Sizes derived from a `TrainConfig` (never written back into it).

    The loop returns to the host every `chunk_env_steps` = `iterations_per_chunk` x num_envs env
    steps, so warm-up, evaluation, checkpoints and the end of training fall on chunk boundaries:
    each requested step count is rounded up to whole chunks (intervals to the nearest, at least one).

    A member's counters on the device are int32 (`loop.TrainState`) and would wrap past
    2**31 - 1 = 2,147,483,647: `env_steps` counts the transitions of all its env instances, so
    it would wrap in a run of over 2,147,483,647 env steps (total_steps rounded to whole chunks);
    `updates` counts gradient steps, (num_chunks - warmup_chunks) x iterations_per_chunk x
    updates_per_step, so it would wrap after 2**31 / updates_per_step training iterations (with
    one env and 5 updates per step, about 429 million env steps past the warm-up). Each
    instance's posterior `sampling_counter` counts its own vector steps (total_steps / num_envs,
    below env_steps), and the replay's `position` and `size` stay below buffer_size + num_envs,
    which `TrainConfig` keeps within int32. `Schedule.of` refuses a run whose env_steps or
    updates counter would wrap.
    """

    num_envs: int
    iterations_per_chunk: int
    """Vector env steps per jitted chunk."""
    num_chunks: int
    warmup_chunks: int
    eval_every_chunks: int
    checkpoint_every_chunks: int

    @classmethod
    def of(cls, train: TrainConfig) -> "Schedule":
        iterations = -(-train.chunk_steps // train.num_envs)
        chunk = iterations * train.num_envs
        num_chunks = -(-train.total_steps // chunk)
        warmup_chunks = -(-train.warmup_steps // chunk)
        _require(
            warmup_chunks < num_chunks,
            f"warm-up ({warmup_chunks} chunks of {chunk} env steps) leaves no training in total_steps "
            f"({train.total_steps}); raise total_steps or lower warmup_steps / chunk_steps",
        )
        total = num_chunks * chunk
        _require(
            total <= INT32_MAX,
            f"total_steps {train.total_steps} ({total} in whole chunks of {chunk}) would wrap the int32 env_steps "
            f"counter, which holds at most 2**31 - 1 = {INT32_MAX} env steps per member; lower total_steps",
        )
        updates = (num_chunks - warmup_chunks) * iterations * train.updates_per_step
        if updates > INT32_MAX:
            wraps_at = warmup_chunks * chunk + -(-(INT32_MAX + 1) // train.updates_per_step) * train.num_envs
            raise ValueError(
                f"{updates} gradient updates ((num_chunks - warmup_chunks) x iterations_per_chunk x updates_per_step "
                f"= ({num_chunks} - {warmup_chunks}) x {iterations} x {train.updates_per_step}) would wrap the int32 "
                f"updates counter at 2**31 = {INT32_MAX + 1}, at env step {wraps_at} of {total}; lower total_steps "
                "or updates_per_step, or raise num_envs"
            )
        return cls(
            num_envs=train.num_envs,
            iterations_per_chunk=iterations,
            num_chunks=num_chunks,
            warmup_chunks=warmup_chunks,
            eval_every_chunks=max(1, round(train.eval_interval / chunk)),
            checkpoint_every_chunks=max(1, round(train.checkpoint_interval / chunk)),
        )

    @property
    def chunk_env_steps(self) -> int:
        return self.iterations_per_chunk * self.num_envs

    @property
    def total_env_steps(self) -> int:
        return self.num_chunks * self.chunk_env_steps

    def as_steps(self) -> dict[str, int]:
        """The effective env-step counts, named like the TrainConfig fields they come from."""
        chunk = self.chunk_env_steps
        return {
            "chunk_steps": chunk,
            "total_steps": self.total_env_steps,
            "warmup_steps": self.warmup_chunks * chunk,
            "eval_interval": self.eval_every_chunks * chunk,
            "checkpoint_interval": self.checkpoint_every_chunks * chunk,
        }

    def adjustments(self, train: TrainConfig) -> list[str]:
        """One line per step count that the chunk grain changed."""
        return [
            f"{name} {getattr(train, name):,} -> {value:,} (whole chunks of {self.chunk_env_steps:,} env steps)"
            for name, value in self.as_steps().items()
            if getattr(train, name) != value
        ]


def parse_overrides(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """("delay_threshold=1.0", "integrator=euler") -> {"delay_threshold": 1.0, "integrator": "euler"}.

    Values are Python literals; a bare word is a string.
    """
    parsed = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"malformed override {pair!r}: expected KEY=VALUE, e.g. delay_threshold=1.0")
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(_not_finite(f"override {key.strip()}={raw.strip()}", value))
        parsed[key.strip()] = value
    return parsed


# -- members: seeds x sweep points ----------------------------------------------------------

SWEEPABLE = {
    "pbac": (
        "bootstrap_rate",
        "posterior_sampling_rate",
        "prior_variance",
        "tau",
        "critic_lr",
        "actor_lr",
        "alpha_lr",
        "use_diversity",
        "use_coherence",
        "use_propagation",
        "prior_scale",
    ),
    "sac": ("tau", "critic_lr", "actor_lr", "alpha_lr"),
    "bootdqn_p": ("bootstrap_rate", "posterior_sampling_rate", "prior_scale", "tau", "critic_lr", "actor_lr"),
    "drnd": ("tau", "critic_lr", "actor_lr", "alpha_lr", "predictor_lr", "bonus_scale", "sign"),
    "ben": ("bootstrap_rate", "action_noise", "tau", "critic_lr", "actor_lr"),
}
"""Per algorithm, the fields a sweep may vary: traced per member, so one compiled program serves
all values. Others (K, widths, loss form, actor kind, batch and env sizes) change shapes or code."""


@dataclasses.dataclass(frozen=True)
class Member:
    """One independently trained member of a run: a seed at one sweep point."""

    index: int
    seed: int
    label: str
    """The configuration's name: "pbac", or e.g. "pbac bootstrap_rate=0.01" in a sweep."""
    overrides: dict[str, Any]
    """{"pbac.bootstrap_rate": 0.01, ...}: what this sweep point (and its task) changes."""
    config: Any
    """This member's algorithm config (the selected section with the task's overrides and the
    sweep point applied)."""
    task: str = ""
    """The env this member trains on (`TrainConfig.env` or one of `TrainConfig.tasks`)."""


def parse_sweep(entries: tuple[str, ...] | list[str], algo: str | None = None) -> list[tuple[str, list[Any]]]:
    """("bootstrap_rate=0.01,0.05",) -> [("bootstrap_rate", [0.01, 0.05])]; with `algo`, names
    are checked against what that algorithm can sweep (a leading "ALGO." is accepted).

    A value listed twice (the same literal, e.g. 0.1 and 0.10) or one that is not finite (1e999
    reads as inf) is refused; `expand_members` also refuses values that are equal once coerced to
    the field's type (1 and 1.0 for a float knob)."""
    grid = []
    for entry in entries:
        name, sep, raw = entry.partition("=")
        name = name.strip()
        if algo is not None:
            name = name.removeprefix(f"{algo}.")
        if not sep or not name or not raw.strip():
            raise ValueError(f"malformed sweep {entry!r}: expected NAME=v1,v2,..., e.g. bootstrap_rate=0.01,0.05")
        if algo is not None and name not in SWEEPABLE[algo]:
            close = difflib.get_close_matches(name, SWEEPABLE[algo], n=2)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"cannot sweep {name!r} of {algo}{hint}; sweepable: {', '.join(SWEEPABLE[algo])}")
        if any(name == other for other, _ in grid):
            raise ValueError(f"{name} is swept twice")
        values = []
        for item in raw.split(","):
            item = item.strip()
            try:
                values.append(ast.literal_eval(item))
            except (ValueError, SyntaxError):
                if not item.isidentifier():  # a bare word is a choice, e.g. sign=penalty,bonus
                    raise ValueError(f"sweep {name}: {item!r} is not a number, True/False or a choice name") from None
                values.append(item)
            value = values[-1]
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(_not_finite(f"sweep {name}: {item}", value))
            if any(type(other) is type(value) and other == value for other in values[:-1]):
                raise ValueError(f"sweep {name} lists {value} twice")
        grid.append((name, values))
    return grid


def parse_task_overrides(entries: tuple[str, ...] | list[str], tasks: tuple[str, ...], algo: str | None = None) -> dict[str, dict[str, Any]]:
    """("ant_very_delayed:prior_variance=5.0",) -> {"ant_very_delayed": {"prior_variance": 5.0}};
    the task must be one of `tasks`, and with `algo` the name must be one of its sweepable knobs."""
    parsed: dict[str, dict[str, Any]] = {}
    for entry in entries:
        task, sep, assignment = entry.partition(":")
        if not sep or "=" not in assignment:
            raise ValueError(f"malformed task override {entry!r}: expected TASK:NAME=VALUE, e.g. ant_very_delayed:prior_variance=5.0")
        if task not in tasks:
            raise ValueError(f"task override {entry!r} names {task!r}, which is not trained in this run; tasks: {', '.join(tasks)}")
        ((name, values),) = parse_sweep([assignment], algo)
        if len(values) != 1:
            raise ValueError(f"task override {entry!r} must give one value, not a list")
        parsed.setdefault(task, {})[name] = values[0]
    return parsed


def expand_members(config: RunConfig) -> list[Member]:
    """The run's members: for each task (`env`, then `tasks`), every sweep point (grid order) of
    the selected algorithm's section with the task's overrides, crossed with seeds
    seed..seed+num_seeds-1."""
    import itertools

    algo = config.algo
    base = config.algorithm_config
    train = config.train
    grid = parse_sweep(train.sweep, algo)
    per_task = parse_task_overrides(train.task_overrides, train.task_names, algo)
    names = [name for name, _ in grid]
    hints = typing.get_type_hints(type(base))
    members = []
    coerced_grid = []
    for name, values in grid:
        coerced = [_coerce(f"sweep {name}", value, hints[name]) for value in values]
        for i, value in enumerate(coerced):
            if value in coerced[:i]:
                first = values[coerced.index(value)]
                same = "" if repr(first) == repr(values[i]) else f" (as {first} and {values[i]})"
                raise ValueError(f"sweep {name} lists {value} twice{same}")
        coerced_grid.append(coerced)
    for task in train.task_names:
        task_values = {name: _coerce(f"task override {task}:{name}", value, hints[name]) for name, value in per_task.get(task, {}).items()}
        for point in itertools.product(*coerced_grid):
            overrides = dict(zip(names, point))
            member_config = dataclasses.replace(base, **{**task_values, **overrides})  # validates the values
            label = " ".join([algo] + [f"{name}={value}" for name, value in overrides.items()])
            for offset in range(train.num_seeds):
                members.append(
                    Member(
                        index=len(members),
                        seed=train.seed + offset,
                        label=label,
                        overrides={f"{algo}.{name}": value for name, value in {**task_values, **overrides}.items()},
                        config=member_config,
                        task=task,
                    )
                )
    return members


def merge_task_configs(base: RunConfig, task_configs: dict[str, RunConfig]) -> RunConfig:
    """`base` (which trains `base.train.task_names`) with `task_overrides` that give each task
    the sweepable knobs of its own config in `task_configs` (e.g. its profile with the same
    command-line options), so one program trains every task with its own settings.

    Anything else that differs between `base` and a task's config (train settings other than the
    env, or a field of the algorithm's section that changes shapes or code, such as K or the
    widths) cannot differ between members of one program: a ValueError names it.
    """
    algo = base.algo
    sweepable = SWEEPABLE[algo]
    ignored = {"env", "tasks", "task_overrides"}
    overrides = list(base.train.task_overrides)
    given = {entry.partition("=")[0] for entry in overrides}
    for task, other in task_configs.items():
        if task not in base.train.task_names:
            raise ValueError(f"{task!r} is not a task of this run; tasks: {', '.join(base.train.task_names)}")
        if other.algo != algo:
            raise ValueError(f"task {task}: its config trains {other.algo}, this run {algo}")
        train_diff = [
            f"train.{f.name} ({getattr(other.train, f.name)!r} vs {getattr(base.train, f.name)!r})"
            for f in dataclasses.fields(TrainConfig)
            if f.name not in ignored and getattr(other.train, f.name) != getattr(base.train, f.name)
        ]
        mine, theirs = base.algorithm_config, other.algorithm_config
        fixed_diff = [
            f"{algo}.{f.name} ({getattr(theirs, f.name)!r} vs {getattr(mine, f.name)!r})"
            for f in dataclasses.fields(mine)
            if f.name not in sweepable and getattr(theirs, f.name) != getattr(mine, f.name)
        ]
        if train_diff or fixed_diff:
            raise ValueError(
                f"task {task} cannot be a member of this program: its config differs in "
                f"{', '.join(train_diff + fixed_diff)}, which all members of one program share; "
                "train it in a run of its own"
            )
        for name in sweepable:
            value = getattr(theirs, name)
            key = f"{task}:{name}"
            if value != getattr(mine, name) and key not in given:
                overrides.append(f"{key}={value}")
    return dataclasses.replace(base, train=dataclasses.replace(base.train, task_overrides=tuple(overrides)))


# -- profiles -------------------------------------------------------------------------------


_PROFILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def _is_profile_name(name: str) -> bool:
    """A plain name of a file in profiles/: letters, digits, _ . -, no leading '.', no '..'."""
    return bool(_PROFILE_NAME.fullmatch(name)) and ".." not in name


def profile_names() -> list[str]:
    """The names `load_profile` accepts: the plain-named files profiles/NAME.toml."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml") if _is_profile_name(p.stem) and p.is_file())


def profile_path(name: str) -> Path:
    """profiles/NAME.toml; a ValueError for a name that is not a plain profile name (a path, '..',
    an empty name) or names no profile."""
    if not isinstance(name, str) or not _is_profile_name(name):
        raise ValueError(
            f"{name!r} is not a profile name: profile names are plain names from profiles/ (e.g. chain); "
            "to load a TOML file elsewhere use --profile-file PATH"
        )
    path = PROFILES_DIR / f"{name}.toml"
    try:
        found = path.is_file()
    except OSError:  # e.g. a name too long for the file system
        found = False
    if not found:
        names = profile_names()
        close = difflib.get_close_matches(name.removesuffix(".toml"), names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"unknown profile {name!r}{hint}; available: {', '.join(names)}")
    return path


def _read_profile_table(path: Path) -> dict[str, Any]:
    """The TOML table of a profile file; a one-line ValueError naming `path` if it is missing, a
    directory, unreadable, not UTF-8 or not valid TOML."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"profile file {path} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"profile file {path} is a directory, not a TOML file") from None
    except OSError as error:
        raise ValueError(f"profile file {path} cannot be read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"profile {path} is not UTF-8 text: {error.reason} at byte {error.start}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"profile {path} is not valid TOML: {error}") from None


def _profile_config(path: Path, table: dict[str, Any]) -> RunConfig:
    try:
        return config_from_dict(table, ignore=("description",))
    except (ValueError, TypeError) as error:
        raise ValueError(f"profile {path}: {error}") from None


def profile_description(name: str) -> str:
    """The profile's `description`; "" if the file cannot be read or parsed (`list_profiles`
    says why). An unknown or non-plain name is still a ValueError."""
    path = profile_path(name)
    try:
        return str(_read_profile_table(path).get("description", ""))
    except ValueError:
        return ""


def load_profile_file(path: str | Path) -> RunConfig:
    """The `RunConfig` of a profile written as a TOML file anywhere (`--profile-file PATH`):
    defaults with its tables applied, checked as `load_profile` checks a named profile. A
    one-line ValueError names the path and what is wrong: missing, a directory, unreadable,
    malformed TOML, or an unknown key or bad value."""
    path = Path(path)
    return _profile_config(path, _read_profile_table(path))


def load_profile(name: str) -> RunConfig:
    """The `RunConfig` of `profiles/NAME.toml`: defaults with the profile's tables applied."""
    return load_profile_file(profile_path(name))


def list_profiles() -> list[tuple[str, str, str | None]]:
    """(name, description, error) for every profiles/*.toml, sorted by name: error is None for a
    profile that loads, else the one-line reason it does not (a malformed or invalid file, or a
    file name that is not a plain profile name); this never raises for a broken profile."""
    listed = []
    for path in sorted(PROFILES_DIR.glob("*.toml")):
        name, description, error = path.stem, "", None
        try:
            profile_path(name)
            table = _read_profile_table(path)
            description = str(table.get("description", ""))
            _profile_config(path, table)
        except ValueError as failure:
            error = str(failure)
        listed.append((name, description, error))
    return listed


def config_from_dict(table: dict[str, Any], ignore: tuple[str, ...] = ()) -> RunConfig:
    """A `RunConfig` from nested dicts {"train": {...}, "algo": "pbac", "pbac": {...}, ...}, every
    key and type checked."""
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = set(table) - fields - set(ignore)
    if unknown:
        raise ValueError(f"unknown section(s) {sorted(unknown)}; valid: {sorted(fields)}")
    defaults = RunConfig()
    hints = typing.get_type_hints(RunConfig)
    built = {}
    for name in fields:
        base = getattr(defaults, name)
        if dataclasses.is_dataclass(base):
            section = table.get(name, {})
            if not isinstance(section, dict):
                raise ValueError(f"{name} must be a table of options ([{name}]), got {section!r}")
            built[name] = _replace_checked(base, section, name)
        elif name in table:
            built[name] = _coerce(name, table[name], hints[name])
    return RunConfig(**built)


def _replace_checked(base: Any, values: dict[str, Any], section: str) -> Any:
    hints = typing.get_type_hints(type(base))
    fields = {f.name for f in dataclasses.fields(base)}
    checked = {}
    for key, value in values.items():
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"unknown option {section}.{key}{hint}; valid: {', '.join(sorted(fields))}")
        checked[key] = _coerce(f"{section}.{key}", value, hints[key])
    return dataclasses.replace(base, **checked)


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        if value not in typing.get_args(annotation):
            raise ValueError(f"{key}={value!r}: expected one of {list(typing.get_args(annotation))}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{key}={value!r}: expected a list")
        (item_type, _) = typing.get_args(annotation)
        return tuple(_coerce(key, v, item_type) for v in value)
    if isinstance(annotation, types.UnionType):
        raise TypeError(f"{key}: union types are not supported in configs")
    if annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not _is_finite(value):
                raise ValueError(_not_finite(key, value))
            return float(value)
    elif annotation is str:
        if isinstance(value, str):
            return value
    raise TypeError(f"{key}={value!r} has type {type(value).__name__}; expected {annotation.__name__}")


def config_to_dict(config: RunConfig) -> dict[str, Any]:
    """JSON-ready nested dict (tuples become lists); `config_from_dict` reads it back."""
    return dataclasses.asdict(config)
