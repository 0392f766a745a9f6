"""Red-team 2026-11-26 (second pass), held: forged emulator executor tokens are refused."""

from __future__ import annotations

import base64
import json

import pytest

from dlc.mesos.emulator.executor_auth import ExecutorTokens
from dlc.mesos.emulator.master import CallError


def _b64(obj) -> str:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _parts(token: str) -> list[str]:
    return token.split(".")


@pytest.fixture
def tokens() -> ExecutorTokens:
    return ExecutorTokens(b"k" * 32)


def _forgeries(tokens: ExecutorTokens) -> dict[str, str]:
    good = tokens.issue("fw", "ex", "c1")
    head, claims, sig = _parts(good)
    other_claims = _b64({"fid": "fw", "eid": "victim", "cid": "c9"})
    return {
        "claims swapped, old signature": f"{head}.{other_claims}.{sig}",
        "alg none, no signature": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{other_claims}.",
        "duplicate alg keys": _b64(b'{"alg":"none","alg":"HS256","typ":"JWT"}')
        + f".{other_claims}.{sig}",
        "signed by another key": ExecutorTokens(b"x" * 32).issue("fw", "victim", "c9"),
        "signature of zeros": f"{head}.{claims}.{_b64(bytes(32))}",
        "two dots only": f"{head}.{claims}",
        "not base64": f"{head}.{claims}.!!!",
    }


def test_forged_tokens_are_unauthorized(tokens):
    for what, forged in _forgeries(tokens).items():
        with pytest.raises(CallError) as refused:
            tokens.principal(f"Bearer {forged}")
        assert refused.value.status == 401, what


def test_the_genuine_token_names_its_executor_and_container(tokens):
    principal = tokens.principal("Bearer " + tokens.issue("fw", "ex", "c1"))
    assert (principal.framework_id, principal.executor_id, principal.container_id) == (
        "fw",
        "ex",
        "c1",
    )
