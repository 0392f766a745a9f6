"""The adapters talk to the core through :class:`~dlc.scheduler.core.facade.SchedulerCore`'s public
methods only, never through its components (issue 26, "a thin locked facade"): a component's
method may expect the caller to hold the core's lock, and reaching ``core.state.book`` from the
API would bypass every rule the facade keeps. Tests and benchmarks may reach a part through its
owner; ``dlc/`` outside the core may not. This reads the source, as ``test_no_core_store`` does
for ``core.store``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dlc.scheduler.core.facade import SchedulerCore
from dlc.store.memory import MemoryJobStore

ROOT = Path(__file__).resolve().parents[2] / "dlc"
ADAPTERS = ("api", "web", "app", "cli", "mesos", "sim")
SOURCES = sorted(p for name in ADAPTERS for p in (ROOT / name).rglob("*.py"))


def _parts() -> frozenset[str]:
    """The facade's component attributes (``state``, ``offer_round``, ...), read off a core."""
    return frozenset(k for k in vars(SchedulerCore(MemoryJobStore())) if not k.startswith("_"))


PARTS = _parts()


def part_reaches(source: str) -> list[int]:
    """Lines that read a component through something named ``core`` (``core.state``,
    ``self.core.offer_round``, ``getattr(core, "views")``)."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if _reaches_part(node)]


def _named_core(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in {"core", "_core"}) or (
        isinstance(node, ast.Attribute) and node.attr in {"core", "_core"}
    )


def _reaches_part(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in PARTS and _named_core(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = node.args
        return (node.func.id in {"getattr", "hasattr"} and len(args) >= 2
                and _named_core(args[0]) and isinstance(args[1], ast.Constant)
                and args[1].value in PARTS)  # fmt: skip
    return False


def test_the_facade_has_the_components_this_rule_guards():
    assert {"state", "offer_round", "status_updates", "views", "requests"} <= PARTS


def test_the_rule_catches_each_way_of_reaching_a_component():
    assert part_reaches("book = core.state.book") == [1]
    assert part_reaches("x = 1\nself.core.offer_round.prepare_launch()") == [2]
    assert part_reaches("v = getattr(self._core, 'views')") == [1]
    assert part_reaches("job.state\ncore.get_job(j).state\nrequest.state") == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_adapters_use_only_the_facades_methods(path):
    lines = part_reaches(path.read_text())
    assert not lines, (
        f"{path.relative_to(ROOT.parent)} reaches a core component at line(s) {lines}: call "
        "SchedulerCore's public methods (add one there if the adapter needs more)"
    )
