"""The fault catalogue (docs/reliability.md) stays true: every test it names exists, and every fault test
module is named in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reliability.md"
_TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def table_rows():
    return [line for line in PAGE.read_text().splitlines() if line.startswith("| ") and not line.startswith("| fault")]


def test_every_test_named_in_the_catalogue_exists():
    references = [m.groups() for row in table_rows() for m in _TEST_REF.finditer(row)]
    assert len(references) >= 30
    missing = []
    for path, name in references:
        source = ROOT / path
        if not source.is_file() or not re.search(rf"^def {name}\(", source.read_text(), re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert missing == [], f"docs/reliability.md names tests that do not exist: {missing}"


def test_every_row_has_a_test_or_is_marked_planned():
    for row in table_rows():
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if set(cells[1:]) == {"planned"}:
            continue
        assert _TEST_REF.search(cells[-1]), f"row without a test: {row}"


def test_every_fault_test_module_is_in_the_catalogue():
    text = PAGE.read_text()
    modules = sorted(p.name for p in Path(__file__).parent.glob("test_*.py") if p.name != Path(__file__).name)
    absent = [name for name in modules if f"tests/faults/{name}::" not in text]
    assert absent == [], f"fault test modules missing from docs/reliability.md: {absent}"
