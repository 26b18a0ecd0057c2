"""The documentation's links resolve: every relative link of README.md, docs/*.md and benchmarks/README.md
points at a file that exists (and at a heading that exists, for ``#anchor`` links into Markdown), and every
result file the pages name is in benchmarks/results/, where nothing is left that no page names."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RESULTS = ROOT / "benchmarks" / "results"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"```.*?```", re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set:
    text = CODE_BLOCK.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def links(page: Path):
    text = CODE_BLOCK.sub("", page.read_text(encoding="utf-8"))
    for match in LINK.finditer(text):
        target = match.group(1)
        if not re.match(r"[a-z]+://|mailto:", target):
            yield target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target} (no heading)")
    assert broken == [], f"{page.relative_to(ROOT)}: {broken}"


def test_every_result_file_named_exists_and_every_result_file_is_named():
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    named = set(re.findall(r"results/([\w.\-]+\.(?:json|csv|png))", text))
    files = {p.name for p in RESULTS.iterdir() if p.is_file()}
    # "`sac_bench.json`, `sac_pendulum_learning.csv` and `.png`": a bare ".png" names the sibling of a ".csv"
    named |= {m for m in re.findall(r"`([\w\-]+\.(?:json|csv|png))`", text) if m in files}
    named |= {re.sub(r"\.csv$", ".png", m) for m in named if m.endswith(".csv")}
    assert sorted(named - files) == [], "named but missing"
    assert sorted(files - named) == [], "in benchmarks/results/ but named by no page"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_rlearn_name_the_page_gives_exists(page):
    """A module, class or function named as ``rlearn.x.Y`` or ``policies.Y`` is importable under that name."""
    names = set(re.findall(r"`((?:rlearn|policies)(?:\.[A-Za-z_]\w*)+)", page.read_text(encoding="utf-8")))
    assert sorted(name for name in names if not _resolves(name)) == []
