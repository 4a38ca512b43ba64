"""The README and docs/ as checked text: links and images resolve, every quoted `python train.py ...`
command parses as train.py would parse it (tyro; nothing runs, nothing compiles), every topic page
says what it covers and which commands it documents, every `docs/<page>.md "<section>"` the code
cites exists, and the README stays a front page (<= 250 lines).

Quick tier: it reads text files and parses command lines, a few seconds in all."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 250

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
INLINE_COMMAND = re.compile(r"`(python train\.py[^`]*)`")
CITATION = re.compile(r"docs/([\w./-]+\.md)\s+\"([^\"]+)\"")
OPTION = re.compile(r"--[a-z][a-z0-9_.-]*[a-z0-9]")
PLACEHOLDER = re.compile(r"<|\[|\.\.\.|\{|\||\b[A-Z][A-Z0-9_]+\b")
"""Marks a syntax template rather than a command line: <task>, [options], ..., {a,b}, a|b, NAME, RUN_DIR."""


def _tracked(*patterns: str) -> list[Path]:
    """Files git tracks (or would: untracked but not ignored), so that outputs under runs/ never count;
    outside a git checkout (an unpacked sdist), every matching file but those under runs/ and .venv/."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        skipped = ("runs", ".venv", ".git")
        found = {path for pattern in patterns for path in ROOT.glob(pattern.replace("*.", "**/*.", 1) if "/" not in pattern else pattern)}
        return sorted(path for path in found if path.is_file() and path.relative_to(ROOT).parts[0] not in skipped)
    return sorted({ROOT / name for name in listed if (ROOT / name).is_file()})


def markdown_files() -> list[Path]:
    """README.md and every Markdown file under docs/ (pages, and the reports and logs kept there)."""
    return [ROOT / "README.md", *_tracked("docs/*.md", "docs/**/*.md")]


def topic_pages() -> list[Path]:
    """The pages of docs/, one per topic; the reports under docs/ (results.md, probe.md) are
    outputs of commands, not pages."""
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "docs" / "metaworld" / "closed_loop.md", ROOT / "docs" / "gpu" / "README.md"]


def prose(text: str) -> str:
    """`text` without its fenced code blocks (a link or heading in a code block is code)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*_]", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [match.group(2) for match in HEADING.finditer(prose(path.read_text()))]


def _plain(heading: str) -> str:
    """A heading or a cited section name, compared without markup, case or line breaks (a citation
    in a comment may continue on the next comment line)."""
    text = re.sub(r"\s*\n\s*#?", " ", heading)
    return " ".join(re.sub(r"[`*]", "", text).split()).lower()


def commands(text: str) -> list[str]:
    """Every `python train.py ...` command line in `text`, as written: in code blocks (continuation
    lines joined; comments, shell operators and anything before `python` dropped) and in inline code."""
    found = []
    for block in FENCE.finditer(text):
        pending = ""
        for line in block.group(0).splitlines()[1:-1]:
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            line, pending = pending + line, ""
            start = line.find("python train.py")
            if start >= 0:
                found.append(_command_only(line[start:]))
    found += [_command_only(match.group(1)) for match in INLINE_COMMAND.finditer(prose(text))]
    return found


def _command_only(command: str) -> str:
    """`command` without a trailing comment or what follows a shell operator (`&`, `;`, `|`)."""
    command = re.split(r"\s#\s|\s#$", command, maxsplit=1)[0]
    command = re.split(r"\s*(?:&&|\|\||[;&|])(?:\s|$)", command + " ", maxsplit=1)[0]
    return " ".join(command.split())


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/ (limit {README_MAX_LINES})"
    # The two set-up commands come first, as CI's .ci/run runs the second.
    assert lines[3].endswith('pip install -e ".[test]" && python train.py --profile quickstart'), lines[3]
    assert lines[4].endswith('pip install -e ".[test]" && pytest -q'), lines[4]
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]"' in ci and "pytest -q" in ci


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_resolves(path):
    text = prose(path.read_text())
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no such file: {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked})")
        elif anchor and linked.suffix == ".md" and anchor not in {slug(h) for h in headings(linked)}:
            broken.append(f"{target} (no heading with anchor #{anchor} in {linked.name})")
    assert not broken, f"{path.relative_to(ROOT)}: broken links: {broken}"


def test_every_topic_page_says_what_it_covers_and_which_commands():
    missing = []
    for page in topic_pages():
        head = page.read_text().splitlines()[:10]
        assert head[0].startswith("# "), f"{page.relative_to(ROOT)} starts with its title"
        for label in ("What this covers:", "Commands:"):
            if not any(line.startswith(label) for line in head):
                missing.append(f"{page.relative_to(ROOT)}: no '{label}' line at its top")
    assert not missing, missing


def test_every_page_is_linked_from_the_readme_or_another_page():
    linked = set()
    for path in markdown_files():
        for target in LINK.findall(prose(path.read_text())):
            linked.add((path.parent / target.partition("#")[0]).resolve())
    orphans = [str(p.relative_to(ROOT)) for p in topic_pages() if p.resolve() not in linked]
    assert not orphans, f"pages nothing links to: {orphans}"


def test_the_sections_the_code_cites_exist():
    """`docs/design.md "Critic loss"` in a comment names a section (heading) of that page; a
    citation of a README section, README then the quoted name, would have to name one of its."""
    cited, wrong = 0, []
    for path in _tracked("*.py", "*.toml", "*.sh", "*.md"):
        text = path.read_text(errors="replace")
        for page, section in CITATION.findall(text):
            cited += 1
            target = ROOT / "docs" / page
            if not target.is_file():
                wrong.append(f"{path.relative_to(ROOT)}: docs/{page} does not exist")
            elif _plain(section) not in {_plain(h) for h in headings(target)}:
                wrong.append(f"{path.relative_to(ROOT)}: docs/{page} has no section \"{section}\"")
        for section in re.findall(r"README,?\s+\"([^\"]+)\"", text):
            if _plain(section) not in {_plain(h) for h in headings(ROOT / "README.md")}:
                wrong.append(f"{path.relative_to(ROOT)}: README has no section \"{section}\"")
    assert not wrong, wrong
    assert cited >= 20, f"only {cited} citations of docs/ sections found: is the pattern still the one the code uses?"


class Parsed(Exception):
    """Raised where a command would start its work: everything before it (the parse) succeeded."""


@pytest.fixture
def parse_only(monkeypatch, tmp_path):
    """train.py's commands with every step that would do work replaced by `Parsed`, and the checks
    that touch devices by no-ops (the env, override and sweep checks stay: they build env models
    but compile nothing); run from an empty directory, so nothing is written into the repository."""
    import envs
    import envs.registry
    import envs.tools.benchmark
    from mjx_pbac import commands, compilation_cache, devices, policy, probe, profiling, report, runner, table, video
    from mjx_pbac.commands import _common

    def stop(*args, **kwargs):
        raise Parsed

    for module, name in [
        (runner, "train"), (profiling, "measure"), (profiling, "measure_seed_scaling"), (table, "run_table"),
        (report, "write_report"), (probe, "write_probe_report"), (envs.tools.benchmark, "run_benchmark"),
        (policy, "restore"), (video, "run_camera"),
    ]:
        monkeypatch.setattr(module, name, stop)
    for module, name in [
        (_common, "use_platform"), (_common, "check_memory"), (_common, "one_process"),
        (devices, "initialize_distributed"), (compilation_cache, "enable"),
    ]:
        monkeypatch.setattr(module, name, lambda *args, **kwargs: None)
    built = {}
    make = envs.registry.make

    def make_once(name, **overrides):  # the same env is checked by many commands: build it once
        key = (name, repr(sorted(overrides.items())))
        if key not in built:
            built[key] = make(name, **overrides)
        return built[key]

    monkeypatch.setattr(envs.registry, "make", make_once)
    monkeypatch.setattr(envs, "make", make_once)
    directories = iter(range(10**6))

    def main(argv):
        directory = tmp_path / str(next(directories))  # probe and table write their plans where they run
        directory.mkdir()
        monkeypatch.chdir(directory)
        return commands.main(argv)

    return main


def _quoted_commands() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(command lines, syntax templates) quoted in the README and docs/, each with its file."""
    lines, templates = [], []
    for path in markdown_files():
        for command in commands(path.read_text()):
            where = str(path.relative_to(ROOT))
            (templates if PLACEHOLDER.search(command[len("python train.py"):]) else lines).append((where, command))
    return lines, templates


def test_every_quoted_train_command_parses(parse_only, capsys):
    lines, templates = _quoted_commands()
    assert len(lines) >= 40, f"only {len(lines)} train.py command lines found in the docs"
    assert len(templates) <= len(lines) // 2, f"{len(templates)} templates against {len(lines)} command lines: {templates}"
    failed = []
    for command, where in {command: where for where, command in reversed(lines)}.items():
        argv = shlex.split(command)[2:]
        try:
            parse_only(argv)
        except Parsed:
            continue
        except SystemExit as exit_:
            if exit_.code in (None, 0):  # --help, --list-profiles
                continue
            failed.append(f"{where}: `{command}`: {exit_.code}")
        else:
            if not any(word in ("--help", "-h", "--list-profiles") for word in argv):
                failed.append(f"{where}: `{command}`: returned without reaching its work")
    capsys.readouterr()
    assert not failed, "\n".join(failed)


def test_the_parse_check_refuses_what_train_py_refuses(parse_only, capsys):
    """The check above can fail: a misspelt option, an unknown profile or a bad sweep stops the parse."""
    for argv in (
        ["--profile", "quickstart", "--train.num-env", "4"],
        ["--profile", "no_such_profile"],
        ["bench-env", "--env-names", "ant"],
        ["--profile", "chain", "--sweep", "not_a_knob=1,2"],
    ):
        with pytest.raises(SystemExit) as exit_:
            parse_only(argv)
        assert exit_.value.code not in (None, 0), argv
    capsys.readouterr()


def test_commands_are_found_in_code_blocks_and_inline_code():
    text = (
        "Run `python train.py --profile chain --seeds 2` first.\n\n"
        "```bash\n"
        "python train.py report runs/a \\\n  --out report   # the tables\n"
        "JAX_PROCESS_ID=$i python train.py --profile chain --seeds 6 &\n"
        "```\n"
    )
    assert sorted(commands(text)) == sorted([
        "python train.py --profile chain --seeds 2",
        "python train.py report runs/a --out report",
        "python train.py --profile chain --seeds 6",
    ])
    assert PLACEHOLDER.search(" --profile NAME") and PLACEHOLDER.search(" profile <task>_fast")
    assert not PLACEHOLDER.search(" report runs/A --out report --x steps wall")


def test_outside_git_the_same_files_are_checked(monkeypatch):
    """An unpacked sdist has no git: the check then finds the same pages and sources by globbing."""
    with_git = {pattern: _tracked(pattern) for pattern in ("docs/**/*.md", "*.py", "*.toml")}

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(subprocess, "run", no_git)
    for pattern, files in with_git.items():
        globbed = _tracked(pattern)
        assert set(files) <= set(globbed), (pattern, sorted(set(files) - set(globbed))[:5])


def test_every_option_a_syntax_template_names_exists(parse_only, capsys):
    """Templates (`--profile NAME [--train.KEY VALUE]`, `--resume RUN_DIR`, ...) are not parsed, but
    every concrete option they name must be one that some train.py command's --help lists."""
    known = set()
    for argv in (
        ["--profile", "chain", "--help"], ["profile", "--profile", "chain", "--help"],
        ["bench-seeds", "--profile", "chain", "--help"], ["table", "--help"], ["probe", "--help"],
        ["report", "--help"], ["bench-env", "--help"], ["evaluate", "--help"], ["video", "--help"], ["--help"],
    ):
        try:
            parse_only(argv)  # the usage (--help alone) returns; a command's --help exits 0
        except SystemExit as exit_:
            assert exit_.code in (None, 0), (argv, exit_.code)
        known |= set(OPTION.findall(capsys.readouterr().out))
    assert {"--train.chunk-seconds", "--split-lengths", "--seed-counts", "--resume"} <= known, sorted(known)[:20]
    _, templates = _quoted_commands()
    unknown = [
        f"{where}: {option} in `{command}`"
        for where, command in templates
        for option in OPTION.findall(command)
        if option not in known
    ]
    assert not unknown, unknown


def test_no_file_under_docs_is_ignored_by_git():
    """Records under docs/ (a GPU call's run logs in docs/gpu/*/runs/, measured runs beside a
    page) are read by the pages and by tests; a .gitignore pattern that catches them passes here
    and fails on CI's clean clone (it did once: `runs/` hid docs/evidence/data/h200-20261128/runs/)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "docs"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert not ignored, f"files under docs/ that git ignores (commit them or move them): {ignored[:10]}"
