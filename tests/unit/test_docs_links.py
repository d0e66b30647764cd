"""The documentation stays inside the repository: README.md and docs/*.md link only to files here.

Fails on any absolute URL (``http://…``, ``mailto:…``, a bare ``https://…`` that GitHub would turn
into a link), on a relative link that leaves the repository or names a missing file, on a
``#anchor`` that matches no heading of its target (GitHub's slugs), and on a README longer than
``README_MAX_LINES``.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 160

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE_RE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) and ![alt](target); target may be <…> and may carry a "title"
_LINK_RE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
_REF_DEF_RE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_RE = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']*)[\"']", re.IGNORECASE)
_AUTOLINK_RE = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*)>")
_BARE_URL_RE = re.compile(r"(?:\bhttps?://|\bwww\.)\S+", re.IGNORECASE)
_SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


def doc_files(root: Path = REPO) -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code blanked out."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE_RE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            continue
        out.append((n, _INLINE_CODE_RE.sub(lambda c: " " * len(c.group(0)), line)))
    return out


def slugify(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces -> '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # keeps letters, digits, '_', '-' and spaces
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 … suffixes for repeats."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fence: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _FENCE_RE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            continue
        h = _HEADING_RE.match(line)
        if not h:
            continue
        slug = slugify(h.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link and image of a Markdown file (not in code)."""
    found: list[tuple[int, str]] = []
    for n, line in prose_lines(path.read_text(encoding="utf-8")):
        for rx in (_LINK_RE, _REF_DEF_RE, _HTML_RE, _AUTOLINK_RE):
            for m in rx.finditer(line):
                target = m.group(1).strip()
                if target.startswith("<") and target.endswith(">"):
                    target = target[1:-1]
                found.append((n, target))
    return found


def check_file(path: Path, root: Path = REPO) -> list[str]:
    """Problems of one Markdown file's links, as ``file:line: message``."""
    root = root.resolve()
    problems: list[str] = []
    try:
        where = path.resolve().relative_to(root).as_posix()
    except ValueError:
        where = str(path)

    def bad(n: int, msg: str) -> None:
        problems.append(f"{where}:{n}: {msg}")

    for n, line in prose_lines(path.read_text(encoding="utf-8")):
        stripped = re.sub(r"<[^>]*>", "", _LINK_RE.sub("", _AUTOLINK_RE.sub("", line)))
        for m in _BARE_URL_RE.finditer(stripped):
            bad(n, f"bare URL {m.group(0)!r}: name the project in words instead of linking outside the repository")
    for n, target in links(path):
        if not target:
            bad(n, "empty link target")
            continue
        if _SCHEME_RE.match(target) or target.startswith("//"):
            bad(n, f"absolute URL {target!r}: links must stay inside the repository")
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part)
        if file_part.startswith("/"):
            bad(n, f"{target!r} is an absolute path: use a path relative to {where}")
            continue
        dest = (path.parent / file_part).resolve() if file_part else path.resolve()
        try:
            dest.relative_to(root)
        except ValueError:
            bad(n, f"{target!r} points outside the repository")
            continue
        if not dest.exists():
            bad(n, f"{target!r}: no such file {dest.relative_to(root).as_posix()}")
            continue
        if anchor:
            if dest.is_dir() or dest.suffix.lower() != ".md":
                bad(n, f"{target!r}: an anchor needs a Markdown file")
            elif unquote(anchor).lower() not in anchors(dest):
                bad(n, f"{target!r}: no heading #{anchor} in {dest.relative_to(root).as_posix()}")
    return problems


def check_docs(root: Path = REPO) -> list[str]:
    problems = [p for f in doc_files(root) if f.exists() for p in check_file(f, root)]
    readme = root / "README.md"
    lines = len(readme.read_text(encoding="utf-8").splitlines())
    if lines > README_MAX_LINES:
        problems.append(f"README.md: {lines} lines, more than {README_MAX_LINES}: move details into docs/")
    return problems


# ---------------------------------------------------------------- the repository's docs


def test_readme_and_docs_link_only_to_existing_files_and_headings_in_the_repository():
    problems = check_docs()
    assert not problems, "broken or outside links in the documentation:\n" + "\n".join(problems)


def test_readme_is_short():
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_docs_index_lists_every_page_and_the_readme_links_the_index():
    index = REPO / "docs" / "index.md"
    listed = {(index.parent / t.partition("#")[0]).resolve() for _, t in links(index)}
    pages = {p.resolve() for p in (REPO / "docs").glob("*.md") if p.name != "index.md"}
    assert pages, "docs/ holds no pages"
    missing = sorted(p.name for p in pages - listed)
    assert not missing, f"docs/index.md does not link {missing}"
    readme_targets = {t.partition("#")[0] for _, t in links(REPO / "README.md")}
    assert "docs/index.md" in readme_targets


# ---------------------------------------------------------------- the checker itself


def test_slugs_follow_github():
    assert slugify("How a refresh works") == "how-a-refresh-works"
    assert slugify("Checks: the view's ok and error collections") == "checks-the-views-ok-and-error-collections"
    assert slugify("Frontiers: upper, since, as_of") == "frontiers-upper-since-as_of"
    assert slugify("`mvsink refresh` — options") == "mvsink-refresh--options"
    assert slugify("History: since, compaction, vacuum") == "history-since-compaction-vacuum"
    assert slugify("See [the design](design.md)") == "see-the-design"


def test_repeated_headings_get_numbered_anchors(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n## Notes\n\n```md\n## Not a heading\n```\n\n## Notes\n")
    assert anchors(page) == {"title", "notes", "notes-1"}


def test_checker_reports_each_kind_of_broken_link(tmp_path):
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (tmp_path / "outside.md").write_text("# Outside\n")
    (root / "docs" / "page.md").write_text("# Page\n\n## A section\n")
    (root / "README.md").write_text(
        "\n".join(
            [
                "# Readme",
                "[ok file](docs/page.md) [ok anchor](docs/page.md#a-section) [ok here](#readme)",
                '![ok image](docs/page.md "title")',
                "[missing file](docs/nope.md)",
                "[missing anchor](docs/page.md#no-such-section)",
                "[web](https://example.org/x) and <https://example.org/auto>",
                "[leaves the repo](../outside.md)",
                "[absolute path](/etc/passwd)",
                "a bare link http://example.org/bare in prose",
                "`[in code](https://example.org/code)` is not a link",
                "```",
                "[in a fence](nowhere.md) https://example.org/fenced",
                "```",
                "[ref]: ../outside.md",
                '<a href="https://example.org/html">html</a>',
            ]
        )
        + "\n"
    )
    problems = check_file(root / "README.md", root)
    text = "\n".join(problems)
    assert "docs/nope.md" in text
    assert "#no-such-section" in text
    assert "https://example.org/x" in text and "https://example.org/auto" in text
    assert "https://example.org/html" in text
    assert "http://example.org/bare" in text
    assert text.count("outside the repository") >= 2  # ../outside.md as a link and as a reference
    assert "/etc/passwd" in text
    assert "example.org/code" not in text and "nowhere.md" not in text and "fenced" not in text
    assert not [p for p in problems if "docs/page.md" in p and "nope" not in p and "no-such" not in p]
    assert len(problems) == 9, text


def test_checker_reports_a_long_readme(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# R\n" + "line\n" * README_MAX_LINES)
    problems = check_docs(tmp_path)
    assert any("more than" in p for p in problems), problems
