"""Readable code: no function in src/fdsml over 80 lines (the developers' guide), counted by the syntax tree."""

import ast
from pathlib import Path

from tests.support import PACKAGE

LIMIT = 80


def long_functions(root: Path, limit: int) -> list[str]:
    """``file:line name (N lines)`` of every function or method under ``root`` longer than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines():
    assert not long_functions(PACKAGE, LIMIT), "split these functions:\n" + "\n".join(long_functions(PACKAGE, LIMIT))


def test_the_count_sees_a_long_function(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "long.py").write_text(f"def short():\n    pass\n\n\nclass A:\n    def long(self):\n{body}\n")
    assert long_functions(tmp_path, LIMIT) == [f"{tmp_path.name}/long.py:6 long ({LIMIT + 1} lines)"]
