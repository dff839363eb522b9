"""The run file's module is the one place that starts the service in the background."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "memstream"


def _starts_the_service(tree: ast.AST) -> bool:
    """Whether a list literal names ``memstream`` and ``up`` (``[..., "-m", "memstream", "up"]``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.List):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if "memstream" in words and "up" in words:
                return True
    return False


def test_only_the_run_file_module_starts_the_service_in_the_background():
    starters = sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
                      if _starts_the_service(ast.parse(path.read_text(), str(path))))
    assert starters == ["core/runfile.py"]
