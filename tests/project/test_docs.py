"""The documentation holds together: the README stays a manual of at most 300 lines, every relative link and image in
README.md, docs/*.md and benchmarks/README.md leads to a file that exists (and to a heading that exists, when the link
names one in a Markdown page), every page of docs/ is linked from README.md or docs/README.md, every script in
benchmarks/ is named in benchmarks/README.md, and no page names an issue number (the pages say what is, not which
ticket made it so); nor does any code, docstring, comment or message of the project (lab_models/, app/ with its
catalogues, benchmarks/, tests/, app.py, the requirements and .ci/run).

Each check is a function that returns the problems it finds, so that each is run twice: on the repository, where it
must find nothing, and on a small planted example, where it must find the planted fault (a check that cannot fail
proves nothing).

Anchors follow GitHub's rule for a heading's id: lower case, every character that is not a letter, a digit, a space,
`-` or `_` dropped, spaces turned into `-`, and `-1`, `-2`, ... added to repeated ids.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest


def repository_root() -> Path:
    """The folder that holds README.md and lab_models/, found from this file (whichever folder of tests/ holds it)."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "README.md").is_file() and (folder / "lab_models").is_dir():
            return folder
    raise AssertionError(f"no repository root above {__file__}")


ROOT = repository_root()
README_MAX_LINES = 300
FENCED_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\s*\d+", re.IGNORECASE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...


def documentation_pages(root: Path) -> list[Path]:
    """README.md, every page of docs/ and benchmarks/README.md."""
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    if (root / "benchmarks" / "README.md").is_file():
        pages.append(root / "benchmarks" / "README.md")
    return pages


def without_code(text: str) -> str:
    """The text with its fenced code blocks and inline code removed (a `[i](x)` in code is no link)."""
    return INLINE_CODE.sub("", FENCED_CODE.sub("", text))


def heading_anchor(heading: str) -> str:
    """GitHub's id for a heading: `## Training a checkpoint further (`--init-from`)` -> 'training-a-checkpoint-further---init-from'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading id of a Markdown page, repeated ones numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    ids = set()
    for heading in HEADING.findall(FENCED_CODE.sub("", text)):
        anchor = heading_anchor(heading)
        count = seen.get(anchor, 0)
        ids.add(anchor if count == 0 else f"{anchor}-{count}")
        seen[anchor] = count + 1
    return ids


def link_targets(text: str) -> list[str]:
    """The targets of every link and image of a Markdown text, outside code."""
    return LINK_TARGET.findall(without_code(text))


def broken_links(page: Path) -> list[str]:
    """'page: target (why)' for each relative link of `page` that leads to no file, or to no heading of a Markdown page."""
    problems = []
    text = page.read_text(encoding="utf-8")
    for target in link_targets(text):
        if EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            problems.append(f"{page.name}: {target} (no such file)")
        elif anchor and destination.suffix == ".md" and destination.is_file():
            if anchor not in anchors(destination.read_text(encoding="utf-8")):
                problems.append(f"{page.name}: {target} (no heading #{anchor} in {destination.name})")
    return problems


def unlinked_pages(docs_folder: Path, index_pages: list[Path]) -> list[str]:
    """The pages of `docs_folder` that no page of `index_pages` links to."""
    linked = set()
    for index in index_pages:
        for target in link_targets(index.read_text(encoding="utf-8")):
            path_part = target.partition("#")[0]
            if path_part and not EXTERNAL.match(target):
                linked.add((index.parent / path_part).resolve())
    return [page.name for page in sorted(docs_folder.glob("*.md"))
            if page.resolve() not in linked and page.resolve() not in {i.resolve() for i in index_pages}]


def unnamed_scripts(benchmarks_folder: Path) -> list[str]:
    """The scripts of `benchmarks_folder` that its README.md does not name."""
    readme = (benchmarks_folder / "README.md").read_text(encoding="utf-8")
    return [script.name for script in sorted(benchmarks_folder.glob("*.py")) if script.name not in readme]


def source_files(root: Path) -> list[Path]:
    """Every file of code or messages the project writes: the Python of lab_models/, app/, benchmarks/ and tests/, the
    page's catalogues (app/**/*.json), app.py, the requirements and .ci/run; this file aside (it plants what it
    looks for)."""
    found = [path for folder in ("lab_models", "app", "benchmarks", "tests") for pattern in ("*.py", "*.json")
             for path in sorted((root / folder).rglob(pattern))]
    found += [path for path in (root / "app.py", root / "requirements.txt", root / "requirements-test.txt",
                                root / ".ci" / "run") if path.is_file()]
    return [path for path in found if path.resolve() != Path(__file__).resolve()]


def issue_mentions(page: Path) -> list[str]:
    """'page:line: text' for each line of `page` that names an issue number."""
    return [f"{page.name}:{number}: {line.strip()}"
            for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
            if ISSUE_NUMBER.search(line)]


def readme_too_long(readme: Path, limit: int = README_MAX_LINES) -> list[str]:
    lines = len(readme.read_text(encoding="utf-8").splitlines())
    return [f"{readme.name} has {lines} lines; at most {limit}: move a topic to docs/"] if lines > limit else []


# --- the repository ---------------------------------------------------------------------------------------------

def test_the_readme_is_a_manual_of_at_most_300_lines():
    assert readme_too_long(ROOT / "README.md") == []


@pytest.mark.parametrize("page", documentation_pages(ROOT), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_image_leads_somewhere(page):
    assert broken_links(page) == []


def test_every_docs_page_is_linked_from_the_readme_or_the_docs_index():
    assert (ROOT / "docs" / "README.md").is_file()
    assert unlinked_pages(ROOT / "docs", [ROOT / "README.md", ROOT / "docs" / "README.md"]) == []


def test_every_benchmark_script_is_named_in_the_benchmarks_readme():
    assert sorted((ROOT / "benchmarks").glob("*.py")), "benchmarks/ holds no script"
    assert unnamed_scripts(ROOT / "benchmarks") == []


@pytest.mark.parametrize("page", documentation_pages(ROOT), ids=lambda page: str(page.relative_to(ROOT)))
def test_no_page_names_an_issue_number(page):
    assert issue_mentions(page) == []


def test_no_code_docstring_comment_or_message_names_an_issue_number():
    files = source_files(ROOT)
    assert len(files) > 300 and ROOT / "lab_models" / "api" / "__init__.py" in files
    assert any(path.suffix == ".json" for path in files)  # the catalogues are read too
    assert [mention for path in files for mention in issue_mentions(path)] == []


# --- each check finds a planted fault ---------------------------------------------------------------------------

@pytest.fixture
def planted(tmp_path):
    """A tiny repository with one fault of each kind beside a correct example of each."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "shot.png").write_bytes(b"\x89PNG")
    (tmp_path / "README.md").write_text(
        "# Lab\n\n## Quick start\n\n![a shot](assets/shot.png) [topic](docs/topic.md#the-topics-heading-x)\n"
        "[missing](docs/missing.md) [wrong heading](docs/topic.md#no-such-heading) [self](#quick-start)\n"
        "![a missing shot](assets/gone.png) `[code](not/a/link.md)` [web](https://example.org/x)\n"
        "As issue 25 asked, and #3 of Issues #7.\n", encoding="utf-8")
    (tmp_path / "docs" / "README.md").write_text("# Index\n[topic](topic.md)\n", encoding="utf-8")
    (tmp_path / "docs" / "topic.md").write_text(
        "# Topic\n\n## The topic's heading (`x`)\n\n```\n## not a heading\n```\n[back](../README.md#quick-start)\n",
        encoding="utf-8")
    (tmp_path / "docs" / "orphan.md").write_text("# Nobody links here\n", encoding="utf-8")
    (tmp_path / "benchmarks" / "bench_named.py").write_text("", encoding="utf-8")
    (tmp_path / "benchmarks" / "bench_forgotten.py").write_text("", encoding="utf-8")
    (tmp_path / "benchmarks" / "README.md").write_text("`bench_named.py`: what it measures\n", encoding="utf-8")
    return tmp_path


def test_a_readme_over_300_lines_is_found(planted):
    readme = planted / "README.md"
    assert readme_too_long(readme) == []
    readme.write_text("line\n" * (README_MAX_LINES + 1), encoding="utf-8")
    assert readme_too_long(readme) == [f"README.md has {README_MAX_LINES + 1} lines; at most 300: move a topic to docs/"]


def test_a_broken_link_a_missing_image_and_a_wrong_heading_are_found(planted):
    assert broken_links(planted / "README.md") == [
        "README.md: docs/missing.md (no such file)",
        "README.md: docs/topic.md#no-such-heading (no heading #no-such-heading in topic.md)",
        "README.md: assets/gone.png (no such file)",
    ]
    assert broken_links(planted / "docs" / "topic.md") == []


def test_heading_anchors_follow_githubs_rule():
    assert heading_anchor("Training a checkpoint further (`--init-from`)") == "training-a-checkpoint-further---init-from"
    assert heading_anchor("The page in English and Chinese (中文)") == "the-page-in-english-and-chinese-中文"
    assert heading_anchor("`bench_seq2seq_speed.py`") == "bench_seq2seq_speedpy"
    assert anchors("# A\n## A\n```\n# B\n```\n") == {"a", "a-1"}


def test_a_docs_page_linked_from_no_index_is_found(planted):
    assert unlinked_pages(planted / "docs", [planted / "README.md", planted / "docs" / "README.md"]) == ["orphan.md"]


def test_a_benchmark_script_missing_from_the_benchmarks_readme_is_found(planted):
    assert unnamed_scripts(planted / "benchmarks") == ["bench_forgotten.py"]


def test_code_naming_an_issue_number_is_found(planted):
    (planted / "app").mkdir()
    (planted / "app" / "tab.py").write_text('"""The tab."""\nLIMIT = 60  # (issue 25\'s heap)\n', encoding="utf-8")
    (planted / "app" / "zh.json").write_text('{"done": "完成"}\n', encoding="utf-8")
    assert [path.name for path in source_files(planted)] == ["tab.py", "zh.json", "bench_forgotten.py",
                                                             "bench_named.py"]
    assert [mention for path in source_files(planted) for mention in issue_mentions(path)] == [
        "tab.py:2: LIMIT = 60  # (issue 25's heap)"]


def test_a_page_naming_an_issue_number_is_found(planted):
    assert issue_mentions(planted / "README.md") == ["README.md:8: As issue 25 asked, and #3 of Issues #7."]
    assert issue_mentions(planted / "docs" / "topic.md") == []
    assert ISSUE_NUMBER.search("§3 of issue 6") and ISSUE_NUMBER.search("issues 4 and 27")
    assert not ISSUE_NUMBER.search("the issue is the tokenizer's 512 tokens")
