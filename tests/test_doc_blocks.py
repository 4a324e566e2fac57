# SPDX-License-Identifier: Apache-2.0
"""The ```python blocks of the README and of docs/*.md run, in order, one namespace per file.

A block whose fence says ```python no-run is shown to readers but not run here (it needs a GPU,
a network model, or takes minutes); everything else must run as written.
"""
import linecache
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    blocks = []
    for m in FENCE.finditer(text):
        if "no-run" in m.group(1):
            continue
        blocks.append((text.count("\n", 0, m.start()) + 1, m.group(2)))
    return blocks


@pytest.mark.parametrize("path", [f for f in FILES if python_blocks(f)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__doc_blocks__"}
    for line, source in python_blocks(path):
        filename = f"<{path.name}:{line}>"
        # Registered so that inspect.getsource works on functions a block defines (@pl.script).
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # our own docs, not user input
