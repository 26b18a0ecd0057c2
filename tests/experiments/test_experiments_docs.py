"""docs/experiments.md: every install command it shows pastes into a shell without installing into the
system Python (the venv form of the README)."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"


def test_install_commands_use_the_venv():
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    installs = [line for block in blocks for line in block.splitlines() if re.search(r"\bpip3? install\b", line)
                and not line.lstrip().startswith(("sudo ", "#"))]
    assert installs, "the page shows how to install the experiments extra"
    bare = [line for line in installs if re.match(r"\s*pip3? install\b", line)]
    assert bare == [], f"bare pip install lines (they install into whatever pip is first on PATH): {bare}"
    assert any('python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e ".[experiments]"' in line
               for line in installs)
