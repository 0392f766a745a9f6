"""The GPU claim decision: orphans removed, live double assignments refused."""

from __future__ import annotations

import os

from dlc.executor.gpu_claim import (
    HeldGpus,
    executor_pid_label,
    gpus_label,
    owner_alive,
    parse_gpus_label,
    parse_share_gpu,
    plan_claim,
    process_start_time,
)

ALIVE = {10: "500", 11: "700"}


def start_time_of(pid):
    return ALIVE.get(pid)


def held(cid, gpus, owner, state="running"):
    return HeldGpus(cid, f"dlc-{cid}", state, frozenset(gpus), owner, f"task-{cid}")


def test_labels_round_trip():
    assert gpus_label((3, 0)) == "3,0"
    assert parse_gpus_label("3,0") == {0, 3}
    assert parse_gpus_label("") == frozenset()
    assert parse_gpus_label("1,x, 2") == {1, 2}


def test_own_pid_label_is_alive():
    label = executor_pid_label()
    assert label == f"{os.getpid()}:{process_start_time(os.getpid())}"
    assert owner_alive(label, process_start_time)


def test_reused_pid_is_not_the_owner():
    assert not owner_alive("10:499", start_time_of)
    assert owner_alive("10:500", start_time_of)
    assert not owner_alive("12:1", start_time_of)


def test_unlabelled_owner_counts_as_alive():
    assert owner_alive(None, start_time_of)
    assert owner_alive("garbage", start_time_of)


def test_orphan_on_a_wanted_gpu_is_removed_live_one_conflicts():
    containers = [
        held("a", {0, 1}, "12:1"),  # executor gone
        held("b", {2}, "10:500"),  # executor alive
        held("c", {5}, "12:1"),  # other GPUs: untouched
        held("d", {3}, "11:700", state="exited"),  # live executor cleaning up
    ]
    plan = plan_claim([1, 2, 3], containers, start_time_of)
    assert [h.container_id for h in plan.remove] == ["a"]
    assert [h.container_id for h in plan.conflicts] == ["b"]
    message = plan.conflict_message([1, 2, 3])
    assert "container dlc-b (task task-b) holds GPUs [2]" in message


def test_no_gpus_wanted_means_nothing_to_do():
    plan = plan_claim([], [held("a", {0}, "12:1")], start_time_of)
    assert plan.remove == [] and plan.conflicts == []


def test_own_container_is_never_an_orphan():
    plan = plan_claim([0], [held("a", {0}, "12:1")], start_time_of, own_container_ids=["a"])
    assert plan.remove == [] and [h.container_id for h in plan.conflicts] == ["a"]


def shared(cid, gpu, owner, state="running"):
    return HeldGpus(cid, f"dlc-{cid}", state, frozenset(), owner, f"task-{cid}", frozenset({gpu}))


def test_share_label_names_its_gpu():
    assert parse_share_gpu("3:4096:250:mps") == {3}
    assert parse_share_gpu(None) == frozenset()
    assert parse_share_gpu("x:1") == frozenset()


def test_whole_gpu_task_meets_shares_of_its_gpus():
    containers = [
        shared("a", 1, "12:1"),  # orphan share on a wanted GPU: removed
        shared("b", 2, "10:500"),  # live share on a wanted GPU: a double assignment
        shared("c", 5, "10:500"),  # other GPU: untouched
    ]
    plan = plan_claim([1, 2], containers, start_time_of)
    assert [h.container_id for h in plan.remove] == ["a"]
    assert [h.container_id for h in plan.conflicts] == ["b"]
    assert "container dlc-b (task task-b) holds a share of GPU [2]" in plan.conflict_message([1, 2])


def test_share_meets_whole_gpu_holders_and_orphan_shares_not_live_shares():
    containers = [
        held("w", {0, 1}, "10:500"),  # live whole-GPU holder of the share's GPU
        held("o", {0}, "12:1"),  # orphan whole-GPU holder
        shared("s", 0, "11:700"),  # live share beside: sharing is the point
        shared("z", 0, "12:1"),  # orphan share: holds memory the scheduler thinks free
        held("x", {3}, "10:500"),  # other GPU
    ]
    plan = plan_claim([0], containers, start_time_of, share=True)
    assert [h.container_id for h in plan.remove] == ["o", "z"]
    assert [h.container_id for h in plan.conflicts] == ["w"]
    assert "holds GPUs [0]" in plan.conflict_message([0])
    alone = plan_claim([0], [shared("s", 0, "11:700")], start_time_of, share=True)
    assert alone.remove == [] and alone.conflicts == []


def test_labels_an_image_could_carry_never_crash_the_claim():
    """``str.isdigit`` accepts ``²`` and ``٣``, which ``int`` rejects or reads as a GPU: a
    label from a user's image must read as no GPU, not raise in every other task's claim."""
    for text in ("²", "0²:1:1:none", "٣:1:1:none", "𝟘"):
        assert parse_share_gpu(text) == frozenset(), text
        assert parse_gpus_label(text) == frozenset(), text
    assert parse_gpus_label("1,²,3") == {1, 3}
