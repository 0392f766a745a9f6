"""The API and the dashboard never reach the store through the core (issue 26, "narrow
ports"). import-linter's ``core-not-store`` contract forbids importing ``dlc.store``, but an
attribute (``core.store``) is no import, so this test reads the source: jobs and history come
from the core's reads (:class:`~dlc.scheduler.core.ports.JobReader`), tokens and tenancy settings
from its writes (:mod:`dlc.scheduler.core.admin`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "dlc"
SOURCES = sorted([*(ROOT / "api").rglob("*.py"), *(ROOT / "web").rglob("*.py")])


def store_reaches(source: str) -> list[int]:
    """Lines that read an attribute named ``store`` (``core.store``, ``api.core.store``,
    ``getattr(core, "store")``)."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if _names_store(node)]


def _names_store(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "store"
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    args = node.args
    return (node.func.id in {"getattr", "hasattr"} and len(args) >= 2
            and isinstance(args[1], ast.Constant) and args[1].value == "store")  # fmt: skip


def test_the_rule_catches_each_way_of_reaching_the_store():
    assert store_reaches("job = core.store.get_job(job_id)") == [1]
    assert store_reaches("x = 1\nstore = api.core.store") == [2]
    assert store_reaches("s = getattr(core, 'store')") == [1]
    assert store_reaches("job = core.get_job(job_id)\nblobs = BlobStore(root)") == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_api_and_web_never_reach_the_store(path):
    lines = store_reaches(path.read_text())
    assert not lines, (
        f"{path.relative_to(ROOT.parent)} reaches the store at line(s) {lines}: read jobs "
        "through the core (SchedulerCore.get_job/all_jobs/job_history, ports.JobReader) and "
        "write tokens and tenancy through its methods (core.admin)"
    )
