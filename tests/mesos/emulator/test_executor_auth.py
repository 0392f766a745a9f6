"""The emulator's executor tokens: signed, bound to one framework, executor and container."""

from __future__ import annotations

import base64
import json

import pytest

from dlc.mesos.emulator.executor_auth import ExecutorPrincipal, ExecutorTokens, check_call
from dlc.mesos.emulator.master import CallError


def _call(fid: str = "f1", eid: str = "e1") -> dict:
    return {"type": "UPDATE", "framework_id": {"value": fid}, "executor_id": {"value": eid}}


def test_a_token_names_its_executor_and_container() -> None:
    tokens = ExecutorTokens()
    principal = tokens.principal("Bearer " + tokens.issue("f1", "e1", "c1"))
    assert principal == ExecutorPrincipal("f1", "e1", "c1")
    check_call(principal, _call())


@pytest.mark.parametrize(
    "header",
    [None, "", "Basic dXNlcjpwdw==", "Bearer", "Bearer a.b", "Bearer !!.??.##"],
)
def test_calls_without_a_valid_bearer_token_are_401(header) -> None:
    with pytest.raises(CallError) as err:
        ExecutorTokens().principal(header)
    assert err.value.status == 401


def test_a_token_with_changed_claims_or_another_key_is_401() -> None:
    tokens = ExecutorTokens()
    header, _claims, signature = tokens.issue("f1", "e1", "c1").split(".")
    forged = base64.urlsafe_b64encode(json.dumps({"fid": "f1", "eid": "victim", "cid": "c9"})
                                      .encode()).rstrip(b"=").decode()  # fmt: skip
    for token in (f"{header}.{forged}.{signature}", ExecutorTokens().issue("f1", "e1", "c1")):
        with pytest.raises(CallError) as err:
            tokens.principal(f"Bearer {token}")
        assert err.value.status == 401


@pytest.mark.parametrize("call", [_call(eid="e2"), _call(fid="f2"), {"type": "UPDATE"}])
def test_a_call_for_another_executor_is_403(call) -> None:
    with pytest.raises(CallError) as err:
        check_call(ExecutorPrincipal("f1", "e1", "c1"), call)
    assert err.value.status == 403
