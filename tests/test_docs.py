"""The README and docs/ as checked text: links and images resolve, every quoted `python train.py ...`
command parses as train.py would parse it (tyro; nothing runs, nothing compiles), every topic page
says what it covers and which commands it documents, every `docs/<page>.md "<section>"` the code
cites exists, the README stays a front page (<= 115 lines of <= 200 characters), reference pages
hold no dates or commit hashes outside links, every evidence page opens with its header and is
listed in the evidence index.

Quick tier: it reads text files and parses command lines, a few seconds in all."""

from __future__ import annotations

import hashlib
import itertools
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 115
README_MAX_WIDTH = 200
DOCS_MAX_BYTES = 4_000_000
"""docs/ with its run data: what a page's figures are computed from, logs gzip-compressed."""
EVIDENCE = ROOT / "docs" / "evidence"
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
COMMIT = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])")
"""A commit hash as the docs write one: 7-40 hex digits with at least one digit and one letter."""

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
    """README.md and every Markdown file under docs/ (pages, and the reports kept with the run data)
    and benchmarks/."""
    return [ROOT / "README.md", *_tracked("docs/*.md", "docs/**/*.md", "benchmarks/**/*.md")]


def topic_pages() -> list[Path]:
    """The reference pages, one per topic: docs/*.md and the GPU scripts' README. The evidence
    pages (docs/evidence/) and the reports under them (results.md, probe.md) are not topic pages."""
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "gpu" / "README.md"]


def evidence_pages() -> list[Path]:
    """docs/evidence/<study>.md: one page per study; README.md is their index."""
    return sorted(path for path in EVIDENCE.glob("*.md") if path.name != "README.md")


def without_links(text: str) -> str:
    """`text` with every Markdown link and image removed (text and target): a date or a commit is
    allowed there, as the name of an evidence page or of its data."""
    return LINK.sub("", text)


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
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/ (limit {README_MAX_LINES})"
    wide = [number for number, line in enumerate(lines, 1) if len(line) > README_MAX_WIDTH]
    assert not wide, f"README.md lines over {README_MAX_WIDTH} characters: {wide}"
    # The two set-up commands, a copy-paste pair in one code block; CI's .ci/run runs the second.
    blocks = [block.group(0).splitlines()[1:-1] for block in FENCE.finditer(text)]
    pairs = [pair for block in blocks for pair in itertools.pairwise(block)]
    assert any(
        a.endswith('pip install -e ".[test]" && python train.py --profile quickstart') and b.endswith('pip install -e ".[test]" && pytest -q')
        for a, b in pairs
    ), "README.md: the two set-up commands are not a pair of lines in one code block"
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]"' in ci and "pytest -q" in ci
    # No dates or commits in its prose: they are on the evidence pages its results link to.
    found = DATE.findall(without_links(text)) + COMMIT.findall(without_links(text))
    assert not found, f"README.md names dates or commits outside links: {found}"


@pytest.mark.parametrize("path", topic_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_reference_pages_hold_no_dates_or_commits_outside_links(path):
    """A reference page says how things are; a figure it quotes links to its evidence page, where
    the date and the commit are."""
    text = without_links(path.read_text())
    found = [f"line {text[:match.start()].count(chr(10)) + 1}: {match.group(0)}" for pattern in (DATE, COMMIT) for match in pattern.finditer(text)]
    assert not found, f"{path.relative_to(ROOT)}: dates or commits outside links (move them to an evidence page): {found}"


def test_the_date_and_commit_checks_can_fail():
    text = without_links("Measured on 2026-11-28 at e7db462 ([h200-20261128](evidence/h200-20261128.md), [x](a/1b1ff04.md)).")
    assert DATE.findall(text) == ["2026-11-28"] and COMMIT.findall(text) == ["e7db462"]
    assert not COMMIT.findall("runs/quickstart-hopper-s0-20261128-101500, 48000 steps, deadline, facade, 1234567")


@pytest.mark.parametrize("path", evidence_pages(), ids=lambda p: p.name)
def test_every_evidence_page_opens_with_its_header(path):
    """Title, then a `text` block: `date: ... · commit: ... · device: ... · jax ...`, `command: ...`,
    `data: docs/evidence/data/...` (the data's folder or files exist)."""
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# "), f"{path.name}: starts with its title"
    body = "\n".join(lines[1:]).lstrip("\n")
    assert body.startswith("```text\n"), f"{path.name}: the header block (```text) comes right after the title"
    header = body.split("```", 2)[1].splitlines()[1:]
    labels = [line.split(":", 1)[0] for line in header]
    assert labels[:3] == ["date", "command", "data"], f"{path.name}: header lines {labels}, want date, command, data"
    first = header[0]
    for field in ("commit:", "device:", "jax"):
        assert field in first, f"{path.name}: the date line names no {field!r}: {first}"
    assert DATE.search(first), f"{path.name}: no YYYY-MM-DD date in {first}"
    data = re.findall(r"docs/evidence/data/[\w./-]+", header[2])
    assert data, f"{path.name}: the data line names no path under docs/evidence/data/: {header[2]}"
    missing = [name for name in data if not (ROOT / name.rstrip(".,;")).exists()]
    assert not missing, f"{path.name}: data paths that do not exist: {missing}"


def test_the_evidence_index_lists_every_page_newest_first():
    index = (EVIDENCE / "README.md").read_text()
    listed = [target for target in LINK.findall(prose(index)) if target.endswith(".md") and "/" not in target]
    assert sorted(listed) == sorted(path.name for path in evidence_pages()), "docs/evidence/README.md lists every evidence page once"
    dates = []
    for name in listed:
        first = (EVIDENCE / name).read_text().split("```text", 1)[1].splitlines()[1]
        dates.append(max(DATE.findall(first)))  # a study over several days: its last
    assert dates == sorted(dates, reverse=True), f"evidence index not newest first: {list(zip(listed, dates))}"


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
    """Records under docs/ (a GPU run's logs in docs/gpu/*/runs/, measured runs beside a
    page) are read by the pages and by tests; a .gitignore pattern that catches them passes here
    and fails on CI's clean clone (it did once: `runs/` hid docs/evidence/data/h200-20261128/runs/)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "docs"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert not ignored, f"files under docs/ that git ignores (commit them or move them): {ignored[:10]}"


def test_docs_and_their_data_stay_small():
    """docs/ holds its pages and what their figures are drawn from (run logs compressed, no
    checkpoints, metrics streams or TensorBoard files): at most DOCS_MAX_BYTES, and no plain
    .jsonl log (a kept run's logs are .jsonl.gz, which `train.py report` reads)."""
    files = _tracked("docs/*", "docs/**/*")
    total = sum(path.stat().st_size for path in files)
    largest = sorted(files, key=lambda path: path.stat().st_size)[-3:]
    assert total <= DOCS_MAX_BYTES, f"docs/ holds {total:,} bytes (budget {DOCS_MAX_BYTES:,}); largest: {largest}"
    plain = [str(path.relative_to(ROOT)) for path in files if path.suffix == ".jsonl"]
    assert not plain, f"run logs under docs/ not compressed (gzip -9 -n FILE): {plain[:5]}"
    assert not [path for path in files if path.suffix in (".npz", ".msgpack") or "tfevents" in path.name]


WORD = re.compile(r"\.\.|[a-z0-9_]+(?:\.[a-z0-9_]+)*")
OUTSIDE = frozenset([
    "9d5e33ea197579b6", "df8b57f1ee981389", "c7869330957f7301", "bbb7e4fdad15d6f0", "d6709cd49ed87966", "2c0a46827e1a3726",
    "78ee12c65d407ba0", "c700a5c376cbd6fa", "3b98c768513f896c", "d3ecf243acf8aace", "de88be478f65cb21", "4407fe746a144701",
    "d104d6f67a1b899c", "0437db2ca5c88c29", "05f4870a98490b3b", "da795d15def15b03", "f5bd9d1a9576e563", "fa6ae184e1322b42",
    "fcfd3250e3ed2ae3", "0122b4805680d730", "8ee47f99b969e2fb", "3ca4186da4fe3b28", "028cdc72b35c1bc2", "6b21b14506f8d63e",
    "b4d37d9491addd7f", "43b18044d9ed67ff", "8ce2f61040adbffc", "48207d2d39715bf2", "d885d2d3c4365bc4", "37c572855dd966cd",
    "81abe39d04df6163", "d19e135be045694d", "79a0cdedbd50369b", "0830f1dd2469e50e", "58a4224e4b906bcd", "759e8e5d53f525ad",
])
"""The words and two-word phrases of the machines and bookkeeping the work behind the project was
done with (paths outside the repository, how machines were handed out and timed, merges, the work's
sittings), as the first 16 hex digits of their SHA-256: the check holds the list without the
tree holding the words."""


def outside_words(text: str) -> list[tuple[int, str]]:
    """(line, phrase) of every word or pair of adjacent words of `text` (lower-cased; ".." is a
    word, so a path's parts are words) whose digest is in OUTSIDE."""
    found = []
    for number, line in enumerate(text.lower().splitlines(), start=1):
        words = WORD.findall(line)
        for phrase in [*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))]:
            if hashlib.sha256(phrase.encode()).hexdigest()[:16] in OUTSIDE:
                found.append((number, phrase))
    return found


def test_no_file_speaks_of_anything_but_the_project():
    """Docs, code, scripts, profiles and tests speak of the project, its runs and the device a
    figure was measured on; the raw logs and records kept as evidence are left as printed."""
    found = []
    for path in _tracked("*"):
        if path.suffix in (".png", ".gif", ".gz") or (path.is_relative_to(EVIDENCE / "data") and path.suffix not in (".md", ".sh")):
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}: {phrase!r}" for line, phrase in outside_words(text)]
    assert not found, "words of the machines the work ran on, not of the project:\n" + "\n".join(found)


def test_the_outside_words_check_can_fail():
    """Two phrases the list holds, assembled here so that this file does not hold them, are found
    on their lines; the project's own words pass."""
    text = "a run of the trainer\nsee " + "../" + "sha" + "red/gpu/" + "QUE" + "UE.md" + "\nin " + "this ses" + "sion"
    path, queue, sitting = ".. " + "sha" + "red", "que" + "ue.md", "this " + "ses" + "sion"
    assert sorted(outside_words(text)) == [(2, path), (2, queue), (3, sitting)]
    assert outside_words("one GPU, one device, a run's session of training on a slot machine") == []
