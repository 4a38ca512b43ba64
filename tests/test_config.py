"""Every out-of-range or non-finite config value is refused with a one-line ValueError that names
the field, the value and what is valid, wherever it comes from (code, TOML, JSON, a sweep, an env
override); profiles load only by plain name or through `load_profile_file`, and the paper's
profiles carry the paper's values. Pure config checks: nothing here builds an env model or
compiles a program."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib

import pytest

import envs
import train as cli
from mjx_pbac import config as config_module
from mjx_pbac.algos import ben, bootdqn_p, drnd, pbac, sac, td3
from mjx_pbac.config import (
    INT32_MAX,
    RunConfig,
    TrainConfig,
    config_from_dict,
    config_to_dict,
    expand_members,
    list_profiles,
    load_profile,
    load_profile_file,
    parse_overrides,
    parse_sweep,
    profile_description,
    profile_names,
    profile_path,
)
from mjx_pbac.schedule import Schedule

SECTIONS = {"pbac": pbac.Config, "sac": sac.Config, "bootdqn_p": bootdqn_p.Config, "drnd": drnd.Config, "ben": ben.Config,
            "td3": td3.Config}


def _float_fields(cls):
    return [f.name for f in dataclasses.fields(cls) if f.type == "float"]


def _refused(message: str):
    return pytest.raises(ValueError, match=re.escape(message))


def _one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


# -- non-finite floats ----------------------------------------------------------------------


@pytest.mark.parametrize("section", sorted(SECTIONS))
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_every_float_field_of_every_section_must_be_finite(section, bad):
    cls = SECTIONS[section]
    fields = _float_fields(cls)
    assert "critic_lr" in fields and "gamma" in fields
    for name in fields:
        with pytest.raises(ValueError) as error:
            cls(**{name: bad})
        assert _one_line(error) == f"{name} must be a finite number (not inf or nan), got {bad}"


def test_the_issue_examples_are_refused():
    with _refused("critic_lr must be a finite number (not inf or nan), got inf"):
        pbac.Config(critic_lr=math.inf)
    with _refused("prior_variance must be a finite number (not inf or nan), got inf"):
        pbac.Config(prior_variance=math.inf)
    with _refused("init_log_alpha must be a finite number (not inf or nan), got nan"):
        pbac.Config(init_log_alpha=math.nan)


def test_an_int_too_large_for_a_float_is_not_finite():
    with _refused("critic_lr must be a finite number"):
        pbac.Config(critic_lr=10**400)
    with _refused("pbac.critic_lr must be a finite number"):
        config_from_dict({"pbac": {"critic_lr": 10**400}})


@pytest.mark.parametrize(
    "text, message",
    [
        ("[pbac]\ncritic_lr = inf\n", "pbac.critic_lr must be a finite number (not inf or nan), got inf"),
        ("[pbac]\nprior_variance = +inf\n", "pbac.prior_variance must be a finite number (not inf or nan), got inf"),
        ("[sac]\ninit_log_alpha = nan\n", "sac.init_log_alpha must be a finite number (not inf or nan), got nan"),
        ("[drnd]\nbonus_scale = -inf\n", "drnd.bonus_scale must be a finite number (not inf or nan), got -inf"),
        ("[ben]\naction_noise = nan\n", "ben.action_noise must be a finite number (not inf or nan), got nan"),
        ("[bootdqn_p]\nprior_scale = inf\n", "bootdqn_p.prior_scale must be a finite number (not inf or nan), got inf"),
    ],
)
def test_toml_inf_and_nan_are_refused(text, message, tmp_path):
    with _refused(message):
        config_from_dict(tomllib.loads(text))
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        load_profile_file(path)
    assert _one_line(error) == f"profile {path}: {message}"


def test_json_nan_is_refused():
    record = config_to_dict(RunConfig())
    record["pbac"]["tau"] = math.nan
    loaded = json.loads(json.dumps(record))  # config.json as written: NaN is valid JSON to Python
    with _refused("pbac.tau must be a finite number (not inf or nan), got nan"):
        config_from_dict(loaded)


def test_sweep_value_that_overflows_to_inf_is_refused():
    with _refused("sweep critic_lr: 1e999 must be a finite number (not inf or nan), got inf"):
        parse_sweep(["critic_lr=1e-3,1e999"])
    with _refused("sweep critic_lr: 1e999 must be a finite number"):
        TrainConfig(env="chain", sweep=("critic_lr=1e999",))
    with _refused("sweep prior_variance: -1e999 must be a finite number"):
        TrainConfig(env="chain", sweep=("prior_variance=-1e999",))


def test_task_override_that_overflows_is_refused():
    with _refused("sweep prior_variance: 1e999 must be a finite number"):
        TrainConfig(env="ant", tasks=("ant_delayed",), task_overrides=("ant_delayed:prior_variance=1e999",))


def test_env_override_must_be_finite():
    with _refused("override delay_threshold=1e999 must be a finite number (not inf or nan), got inf"):
        parse_overrides(["delay_threshold=1e999"])
    with _refused("override delay_threshold=1e999 must be a finite number"):
        TrainConfig(env="hopper", env_overrides=("delay_threshold=1e999",))
    for bad in (math.inf, -math.inf, math.nan, 10**400):
        with _refused(f"override delay_threshold={bad!r} must be a finite number (not inf or nan)"):
            envs.config_of("hopper", delay_threshold=bad)
        with _refused(f"override delay_threshold={bad!r} must be a finite number"):
            envs.make("hopper", delay_threshold=bad)
        with _refused(f"override delay_threshold={bad!r} must be a finite number"):
            envs.make_family(["hopper", "hopper_delayed"], delay_threshold=bad)
    with _refused("override length=nan must be a finite number"):
        envs.make("chain", length=math.nan)
    assert envs.config_of("hopper", delay_threshold=1).delay_threshold == 1.0


def test_env_family_name_too_large_for_a_float_is_refused():
    with _refused("is too large for a float"):
        envs.config_of("deep_chain_" + "9" * 400)


# -- duplicate sweep values -----------------------------------------------------------------


def test_a_value_listed_twice_is_refused():
    with pytest.raises(ValueError) as error:
        parse_sweep(["bootstrap_rate=0.1,0.1"])
    assert _one_line(error) == "sweep bootstrap_rate lists 0.1 twice"
    with _refused("sweep bootstrap_rate lists 0.1 twice"):
        parse_sweep(["bootstrap_rate=0.1,0.2,0.10"])
    with _refused("sweep sign lists penalty twice"):
        parse_sweep(["sign=penalty,bonus,penalty"])
    with _refused("sweep use_diversity lists True twice"):
        parse_sweep(["use_diversity=True,False,True"], "pbac")
    with _refused("sweep bootstrap_rate lists 0.1 twice"):
        TrainConfig(env="chain", sweep=("bootstrap_rate=0.1,0.1",))


def test_values_equal_after_coercion_are_refused():
    parse_sweep(["prior_variance=1,1.0"])  # different literals: only the field's type says they are equal
    config = RunConfig(train=TrainConfig(env="chain", sweep=("prior_variance=1,1.0",)))
    with pytest.raises(ValueError) as error:
        expand_members(config)
    assert _one_line(error) == "sweep prior_variance lists 1.0 twice (as 1 and 1.0)"


def test_a_name_swept_twice_keeps_its_error():
    with _refused("bootstrap_rate is swept twice"):
        parse_sweep(["bootstrap_rate=0.1", "bootstrap_rate=0.2"])


def test_distinct_values_still_make_one_member_each():
    config = RunConfig(train=TrainConfig(env="chain", sweep=("prior_variance=1,2.5", "use_coherence=True,False")))
    members = expand_members(config)
    assert [m.config.prior_variance for m in members] == [1.0, 1.0, 2.5, 2.5]
    assert len({m.label for m in members}) == 4


# -- seeds and int32 sizes ------------------------------------------------------------------


def test_seed_range_is_int32():
    assert TrainConfig(seed=INT32_MAX, num_seeds=1).seed == 2**31 - 1
    assert TrainConfig(seed=INT32_MAX - 1, num_seeds=2).num_seeds == 2
    with pytest.raises(ValueError) as error:
        TrainConfig(seed=INT32_MAX, num_seeds=2)
    assert _one_line(error) == (
        "the seeds seed..seed+num_seeds-1 = 2147483647..2147483648 must lie in [0, 2**31 - 1] = "
        "[0, 2147483647] (seeds are int32 on the device); lower seed or num_seeds"
    )
    for bad in (-1, 2**31, 2**64):
        with _refused(f"seed must lie in [0, 2**31 - 1] = [0, 2147483647] (seeds are int32 on the device), got {bad}"):
            TrainConfig(seed=bad)


@pytest.mark.parametrize(
    "name", ["num_seeds", "total_steps", "num_envs", "batch_size", "updates_per_step", "buffer_size", "warmup_steps",
             "chunk_steps", "eval_interval", "eval_episodes", "checkpoint_interval", "visit_interval", "keep_checkpoints"]
)
def test_train_int_fields_beyond_int32_are_refused(name):
    with pytest.raises(ValueError) as error:
        TrainConfig(**{name: 2**31})
    assert _one_line(error) == f"{name} must be <= 2**31 - 1 = 2147483647 (an int32 on the device), got 2147483648"


@pytest.mark.parametrize(
    "cls, name",
    [(pbac.Config, "num_critics"), (pbac.Config, "posterior_sampling_rate"), (sac.Config, "num_critics"),
     (bootdqn_p.Config, "posterior_sampling_rate"), (drnd.Config, "num_targets"), (drnd.Config, "embedding_size"),
     (ben.Config, "num_critics"), (td3.Config, "policy_delay")],
    ids=lambda value: value if isinstance(value, str) else value.__module__.rsplit(".", 1)[-1],
)
def test_algorithm_int_fields_beyond_int32_are_refused(cls, name):
    with _refused(f"{name} must be <= 2**31 - 1 = 2147483647 (an int32 on the device), got 10000000000"):
        cls(**{name: 10**10})


def test_widths_beyond_int32_are_refused():
    with _refused("hidden_sizes must hold values <= 2**31 - 1 = 2147483647 (int32 shapes on the device), got (64, 2147483648)"):
        pbac.Config(hidden_sizes=(64, 2**31))
    with _refused("predictor_hidden_sizes must hold values <= 2**31 - 1"):
        drnd.Config(predictor_hidden_sizes=(2**40,))
    with _refused("hidden_sizes must hold values <= 2**31 - 1"):
        config_from_dict({"pbac": {"hidden_sizes": [2**31]}})


def test_replay_position_stays_within_int32():
    TrainConfig(buffer_size=INT32_MAX - 4, num_envs=4, total_steps=10**6)
    with _refused("buffer_size + num_envs (2147483643 + 5) must be <= 2**31 - 1 = 2147483647"):
        TrainConfig(buffer_size=INT32_MAX - 4, num_envs=5, total_steps=10**6)


def test_schedule_refuses_an_env_step_count_that_would_wrap():
    # total_steps is within int32 but rounds up to whole chunks beyond it.
    just_under = TrainConfig(total_steps=2_147_483_000, chunk_steps=1000, warmup_steps=0, updates_per_step=0)
    assert Schedule.of(just_under).total_env_steps == 2_147_483_000
    over = dataclasses.replace(just_under, total_steps=2_147_483_001)
    with pytest.raises(ValueError) as error:
        Schedule.of(over)
    assert _one_line(error) == (
        "total_steps 2147483001 (2147484000 in whole chunks of 1000) would wrap the int32 env_steps counter, "
        "which holds at most 2**31 - 1 = 2147483647 env steps per member; lower total_steps"
    )


def test_schedule_refuses_an_update_count_that_would_wrap():
    # 5 updates per env step with one env: 2**31 / 5 = 429,496,729.6 training iterations fit.
    base = TrainConfig(warmup_steps=1, chunk_steps=1, updates_per_step=5)
    just_under = dataclasses.replace(base, total_steps=1 + 429_496_729)
    schedule = Schedule.of(just_under)
    assert (schedule.num_chunks - schedule.warmup_chunks) * 5 == 2_147_483_645
    over = dataclasses.replace(base, total_steps=1 + 429_496_730)
    with pytest.raises(ValueError) as error:
        Schedule.of(over)
    assert _one_line(error) == (
        "2147483650 gradient updates ((num_chunks - warmup_chunks) x iterations_per_chunk x updates_per_step "
        "= (429496731 - 1) x 1 x 5) would wrap the int32 updates counter at 2**31 = 2147483648, at env step "
        "429496731 of 429496731; lower total_steps or updates_per_step, or raise num_envs"
    )
    # More envs share the updates of one vector step: the same run length fits.
    assert Schedule.of(dataclasses.replace(over, num_envs=2, chunk_steps=2, buffer_size=100_000))


# -- profiles -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../profiles/chain", "/tmp/x", "chain/../chain", "", ".chain", "..", "ch ain", "chain\\x", "profiles/chain"])
def test_profile_names_are_plain_names(name):
    message = (
        f"{name!r} is not a profile name: profile names are plain names from profiles/ (e.g. chain); "
        "to load a TOML file elsewhere use --profile-file PATH"
    )
    for load in (profile_path, load_profile, profile_description):
        with pytest.raises(ValueError) as error:
            load(name)
        assert _one_line(error) == message


def test_every_profile_still_loads_by_name():
    names = profile_names()
    assert "chain" in names and "quickstart" in names
    for name in names:
        load_profile(name)
    assert all(error is None for _, _, error in list_profiles())
    with _refused("unknown profile 'chan' (did you mean chain?)"):
        load_profile("chan")


def test_every_profile_loads_and_paper_profiles_carry_the_papers_hyperparameters(capsys):
    cli.main(["--list-profiles"])
    listed = capsys.readouterr().out
    table5 = {  # paper Table 5, "Hyperparameters specific to PBAC": (kappa, PSR, sigma0^2)
        "ant": (0.05, 5, 1.0), "ant_delayed": (0.05, 5, 1.0), "ant_very_delayed": (0.05, 5, 5.0),
        "hopper": (0.01, 5, 1.0), "hopper_delayed": (0.05, 5, 1.0), "hopper_very_delayed": (0.05, 5, 1.0),
        "humanoid": (0.05, 5, 1.0), "humanoid_delayed": (0.05, 5, 1.0),
        "cartpole_swingup_sparse": (0.05, 10, 1.0), "ball_in_cup_catch": (0.05, 5, 1.0), "reacher_hard": (0.05, 5, 1.0),
    }
    budget = {"cartpole_swingup_sparse": 200_000, "ball_in_cup_catch": 100_000, "reacher_hard": 100_000}  # paper Table 7, footnote
    for name, (kappa, psr, prior) in table5.items():
        assert name in listed
        config = load_profile(name)
        assert config.train.env == name
        p, t = config.pbac, config.train
        assert (p.bootstrap_rate, p.posterior_sampling_rate, p.prior_variance) == (kappa, psr, prior)
        assert (p.num_critics, p.hidden_sizes, p.gamma, p.tau, p.critic_lr) == (10, (256, 256), 0.99, 0.005, 3e-4)
        assert (t.num_envs, t.batch_size, t.updates_per_step, t.buffer_size) == (1, 256, 5, 100_000)
        assert (t.warmup_steps, t.total_steps, t.eval_interval, t.eval_episodes) == (10_000, budget.get(name, 300_000), 20_000, 10)
    for name in ("quickstart", "chain", "cartpole_quickstart"):
        assert name in listed
        load_profile(name)


def test_paper_profiles_carry_bootdqn_p_hyperparameters():
    """Paper Table 9, "Hyperparameters specific to BootDQN-P" (BR, PSR, PS); changes from the
    defaults in bold there."""
    table = {
        "ant": (0.05, 5, 5.0), "hopper": (0.05, 5, 5.0), "humanoid": (0.1, 1, 5.0),
        "ant_delayed": (0.1, 1, 1.0), "ant_very_delayed": (0.05, 5, 5.0), "hopper_delayed": (0.05, 5, 5.0),
        "hopper_very_delayed": (0.05, 5, 5.0), "humanoid_delayed": (0.1, 1, 9.0),
        "cartpole_swingup_sparse": (0.05, 10, 1.0), "ball_in_cup_catch": (0.05, 5, 5.0), "reacher_hard": (0.05, 1, 1.0),
    }
    for name, expected in table.items():
        boot = load_profile(name).bootdqn_p
        assert (boot.bootstrap_rate, boot.posterior_sampling_rate, boot.prior_scale) == expected, name
        assert (boot.num_critics, boot.hidden_sizes) == (10, (256, 256))
        assert load_profile(name).sac.num_critics == 2


def test_load_profile_file_matches_the_named_profile(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(profile_path("chain").read_text())
    assert load_profile_file(path) == load_profile("chain")
    assert load_profile_file(str(path)) == load_profile("chain")


def test_load_profile_file_errors_name_the_path(tmp_path):
    missing = tmp_path / "missing.toml"
    with _refused(f"profile file {missing} does not exist"):
        load_profile_file(missing)
    with _refused(f"profile file {tmp_path} is a directory, not a TOML file"):
        load_profile_file(tmp_path)
    malformed = tmp_path / "malformed.toml"
    malformed.write_text("[train\nenv = 'chain'\n")
    with pytest.raises(ValueError) as error:
        load_profile_file(malformed)
    assert _one_line(error).startswith(f"profile {malformed} is not valid TOML: ")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe[train]\n")
    with _refused(f"profile {binary} is not UTF-8 text"):
        load_profile_file(binary)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[train]\nenvv = 'chain'\n")
    with _refused(f"profile {unknown}: unknown option train.envv (did you mean env?)"):
        load_profile_file(unknown)
    not_a_table = tmp_path / "not_a_table.toml"
    not_a_table.write_text("pbac = 3\n")
    with _refused(f"profile {not_a_table}: pbac must be a table of options ([pbac]), got 3"):
        load_profile_file(not_a_table)
    wrong_type = tmp_path / "wrong_type.toml"
    wrong_type.write_text("[train]\nnum_envs = 'many'\n")
    with _refused(f"profile {wrong_type}: train.num_envs='many' has type str; expected int"):
        load_profile_file(wrong_type)


def test_list_profiles_reports_broken_profiles_without_raising(tmp_path, monkeypatch):
    (tmp_path / "good.toml").write_text('description = "a good one"\n[train]\nenv = "chain"\n')
    (tmp_path / "broken.toml").write_text('description = "never read"\n[train\n')
    (tmp_path / "invalid.toml").write_text('description = "reads, does not load"\n[pbac]\ncritic_lr = nan\n')
    monkeypatch.setattr(config_module, "PROFILES_DIR", tmp_path)
    listed = {name: (description, error) for name, description, error in list_profiles()}
    assert sorted(listed) == ["broken", "good", "invalid"]
    assert listed["good"] == ("a good one", None)
    description, error = listed["broken"]
    assert description == "" and error.startswith(f"profile {tmp_path / 'broken.toml'} is not valid TOML") and "\n" not in error
    assert listed["invalid"] == (
        "reads, does not load",
        f"profile {tmp_path / 'invalid.toml'}: pbac.critic_lr must be a finite number (not inf or nan), got nan",
    )
    assert profile_description("good") == "a good one"
    assert profile_description("broken") == ""  # does not raise
    assert profile_description("invalid") == "reads, does not load"
    assert profile_names() == ["broken", "good", "invalid"]
    with _refused("is not valid TOML"):
        load_profile("broken")
