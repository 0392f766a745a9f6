"""Simulator invariants on a seeded slice, policy tables on tiny clusters, fidelity."""

from __future__ import annotations

import numpy as np
import pytest

from dlc.errors import FieldError
from dlc.scheduler.allocator.fragscore import place
from dlc.scheduler.allocator.shares import AgentView, ShareRequest, WorkloadMix
from dlc.sim import io
from dlc.sim.cluster import ClusterState, Placement
from dlc.sim.frag import FragModel, FragState
from dlc.sim.metrics import allocation_curve
from dlc.sim.policies import POLICIES, get_policy
from dlc.sim.policies.base import ClusterView
from dlc.sim.replay import replay
from dlc.sim.trace import NodeSpec, PodSpec, parse_pods
from dlc.sim.workload import arrival_sequence, target_mix


@pytest.fixture(scope="module")
def openb():
    root = io.trace_root()
    return io.load_nodes(root), io.load_pods(root, "default")


def _slice(openb, n_nodes=100, n_pods=300):
    nodes, pods = openb
    rng = np.random.default_rng(7)
    sub_nodes = [nodes[i] for i in sorted(rng.choice(len(nodes), n_nodes, replace=False))]
    sub_pods = [pods[i] for i in sorted(rng.choice(len(pods), n_pods, replace=False))]
    return sub_nodes, sub_pods


@pytest.mark.parametrize("policy", list(POLICIES))
def test_invariants_on_a_seeded_slice(openb, policy):
    nodes, pods = _slice(openb)
    total = sum(n.gpus for n in nodes) * 1000
    rng = np.random.default_rng(42)
    arrivals = arrival_sequence(pods, total, 1.3, rng)
    result = replay(nodes, arrivals, get_policy(policy), target_mix(pods), rng)
    # every pod accounted for: placed or failed, never both
    assert result.placed + len(result.failed) == len(arrivals)
    assert sum(a.total_gpu_milli for a in arrivals) == result.arrived_gpu_milli[-1]
    # never more allocated than arrived, than the cluster has; monotone while pods only arrive
    assert np.all(result.used_gpu_milli <= result.arrived_gpu_milli)
    assert result.used_gpu_milli[-1] <= total
    assert np.all(np.diff(result.used_gpu_milli) >= 0)
    curve = allocation_curve(result)
    assert np.all(np.diff(curve[~np.isnan(curve)]) >= -1e-9)
    # requests reach (about) 130% of the GPUs, overshooting by at most one pod
    assert 1.3 * total - 8000 <= result.arrived_gpu_milli[-1] <= 1.3 * total + 8000


def test_no_gpu_over_allocated_after_replay(openb):
    nodes, pods = _slice(openb)
    rng = np.random.default_rng(1)
    arrivals = arrival_sequence(pods, sum(n.gpus for n in nodes) * 1000, 1.3, rng)
    cluster = ClusterState(nodes)
    view = ClusterView(
        cluster, FragState(FragModel(target_mix(pods), cluster.model_names), cluster)
    )
    policy = get_policy("fgd")
    for pod in arrivals:
        where = policy(pod, view, rng)
        if where is not None:
            cluster.place(pod, where)
            view.frag.update(where.node)
    assert cluster.gpu_left.min() >= 0 and cluster.cpu_left.min() >= 0
    assert cluster.mem_left.min() >= 0
    assert not np.any(cluster.gpu_left[~cluster.gpu_exists])


def test_place_refuses_over_allocation():
    cluster = ClusterState([NodeSpec("n0", 8000, 1000, 1, "T4")])
    share = PodSpec("p", 1000, 10, 1, 600)
    cluster.place(share, Placement(0, (0,)))
    with pytest.raises(ValueError, match="over-allocated"):
        cluster.place(share, Placement(0, (0,)))


# --- tiny hand-made clusters: (nodes, earlier pods with placements, pod) -> expected node
TINY = [NodeSpec("a", 32000, 64000, 2, "T4"), NodeSpec("b", 32000, 64000, 2, "T4")]


def _tiny_view(placed):
    cluster = ClusterState(TINY)
    mix_pods = [PodSpec("m1", 4000, 0, 1, 500), PodSpec("m2", 4000, 0, 1, 1000)]
    view = ClusterView(
        cluster, FragState(FragModel(target_mix(mix_pods), cluster.model_names), cluster)
    )
    for pod, where in placed:
        cluster.place(pod, where)
        view.frag.update(where.node)
    return view


HALF = PodSpec("h", 4000, 1000, 1, 500)
WHOLE = PodSpec("w", 4000, 1000, 1, 1000)


@pytest.mark.parametrize(
    ("policy", "placed", "pod", "node", "gpus"),
    [
        # node b already holds a half share: packers put the next half beside it
        ("packing", [(HALF, Placement(1, (1,)))], HALF, 1, (1,)),
        ("bestfit", [(HALF, Placement(1, (1,)))], HALF, 1, (1,)),
        ("fgd", [(HALF, Placement(1, (1,)))], HALF, 1, (1,)),
        ("dlc", [(HALF, Placement(1, (1,)))], HALF, 1, (1,)),
        ("dlc-arrays", [(HALF, Placement(1, (1,)))], HALF, 1, (1,)),
        ("clustering", [(HALF, Placement(1, (1,)))], HALF, 1, (1,)),
        # a whole GPU: both nodes grow fragmentation by 0, the tie goes to the first
        ("fgd", [(HALF, Placement(1, (1,)))], WHOLE, 0, (0,)),
        ("dlc-arrays", [(HALF, Placement(1, (1,)))], WHOLE, 0, (0,)),
        # production's engine breaks that tie by best fit: b, with one whole GPU free
        ("dlc", [(HALF, Placement(1, (1,)))], WHOLE, 1, (0,)),
        # empty cluster: ties go to the first node by name
        ("bestfit", [], WHOLE, 0, (0,)),
        ("dotprod", [], WHOLE, 0, (0,)),
    ],
)
def test_policy_tables(policy, placed, pod, node, gpus):
    where = get_policy(policy)(pod, _tiny_view(placed), np.random.default_rng(0))
    assert where == Placement(node, gpus)


def test_the_engine_places_a_cpu_only_pod_where_its_cpu_strands_no_gpu():
    # the engine placed a 1-GPU pod of 4 CPUs on a (28 CPUs and one GPU left there). A
    # CPU-only pod of 26 CPUs on a would strand a's free GPU (2 CPUs left, the mix's pod asks
    # 4); on b, 6 CPUs stay beside its 2 GPUs. Best fit (fewest free GPUs) would pick a.
    view, policy, rng = _tiny_view([]), get_policy("dlc"), np.random.default_rng(0)
    one = PodSpec("w1", 4000, 1000, 1, 1000)
    where = policy(one, view, rng)
    assert where == Placement(0, (0,))
    view.cluster.place(one, where)
    view.frag.update(where.node)
    assert policy(PodSpec("c", 26000, 1000, 0, 0), view, rng) == Placement(1, ())


@pytest.mark.parametrize("policy", list(POLICIES))
def test_policies_fail_a_pod_that_fits_nowhere(policy):
    big = PodSpec("big", 4000, 0, 4, 1000)
    assert get_policy(policy)(big, _tiny_view([]), np.random.default_rng(0)) is None


def test_gpu_model_constraint():
    cluster_nodes = [
        NodeSpec("a", 32000, 64000, 1, "T4"),
        NodeSpec("b", 32000, 64000, 1, "V100M32"),
    ]
    cluster = ClusterState(cluster_nodes)
    pod = PodSpec("p", 1000, 0, 1, 300, frozenset({"V100M32"}))
    assert list(cluster.feasible(pod)) == [False, True]


def test_shares_place_on_plain_agent_views():
    views = [
        AgentView("a", 32000, 64000, "A100", (1000, 1000)),
        AgentView("b", 32000, 64000, "A100", (1000, 400)),
    ]
    # whole GPUs are expected next: the share goes onto the GPU already shared
    mix = WorkloadMix(shapes=(ShareRequest(4000, 0, 1, 1000),), weights=(1.0,))
    got = place(ShareRequest(cpu_milli=1000, mem_mib=100, num_gpus=1, gpu_milli=300), views, mix)
    assert (got.agent, got.gpus) == (1, (1,))
    assert place(ShareRequest(1000, 100, 2, 1000, frozenset({"T4"})), views) is None


def test_bad_rows_are_one_line_field_errors():
    with pytest.raises(FieldError, match="num_gpu"):
        parse_pods(
            [{"name": "p", "cpu_milli": "1", "memory_mib": "1", "num_gpu": "9", "gpu_milli": "1"}]
        )
    with pytest.raises(FieldError, match="missing column"):
        parse_pods([{"name": "p"}])


def test_baselines_track_published_curves_on_a_prefix(openb):
    """Short seeded prefix: our mean curve up to 60% demand within 1 point of the paper's."""
    nodes, pods = openb
    expected = io.load_expected(io.trace_root(), "default")
    total = sum(n.gpus for n in nodes) * 1000
    mix = target_mix(pods)
    for name in ("bestfit", "fgd"):
        rng = np.random.default_rng(42)
        arrivals = arrival_sequence(pods, total, 1.3, rng)
        prefix = []
        asked = 0
        for p in arrivals:
            if asked > 0.6 * total:
                break
            prefix.append(p)
            asked += p.total_gpu_milli
        curve = allocation_curve(replay(nodes, prefix, get_policy(name), mix, rng))
        published = np.nanmean(np.array(list(expected[name].values())), axis=0)
        steps = np.arange(5, 60)
        assert np.nanmax(np.abs(curve[steps] - published[steps])) < 1.0


# --- DLC's scoring core (dlc.scheduler.allocator.fragscore), shared with the scheduler


def test_cached_fgd_decides_as_scoring_every_node(openb):
    """FgdPolicy's per-node cache gives the same decisions as the uncached reference."""
    from dlc.sim.policies.fgd import FgdPolicy, fgd

    nodes, pods = _slice(openb)
    rng = np.random.default_rng(3)
    arrivals = arrival_sequence(pods, sum(n.gpus for n in nodes) * 1000, 1.3, rng)
    cluster = ClusterState(nodes)
    view = ClusterView(
        cluster, FragState(FragModel(target_mix(pods), cluster.model_names), cluster)
    )
    cached, placed = FgdPolicy(), 0
    for pod in arrivals:
        where = cached(pod, view, rng)
        assert where == fgd(pod, view, rng)
        if where is not None:
            cluster.place(pod, where)
            view.frag.update(where.node)
            placed += 1
    assert placed > 0


def test_incremental_chooser_matches_full_choice(openb):
    """The sim's DLC policy (incremental) and fragscore.choose (all agents) agree."""
    from dlc.scheduler.allocator import fragscore
    from dlc.sim.policies.dlc import DlcPolicy, request_of, workload_mix

    nodes, pods = _slice(openb)
    rng = np.random.default_rng(5)
    arrivals = arrival_sequence(pods, sum(n.gpus for n in nodes) * 1000, 1.3, rng)
    cluster = ClusterState(nodes)
    mix = target_mix(pods)
    view = ClusterView(cluster, FragState(FragModel(mix, cluster.model_names), cluster))
    mix_arrays = fragscore.mix_arrays(workload_mix(mix), cluster.model_names)
    policy = DlcPolicy()
    for pod in arrivals[:200]:
        where = policy(pod, view, rng)
        agents = fragscore.AgentArrays(
            cluster.model, cluster.cpu_left, cluster.mem_left, cluster.gpu_left, cluster.access
        )
        full = fragscore.choose(request_of(pod), agents, mix_arrays)
        assert (where is None) == (full is None)
        if where is not None:
            assert (where.node, where.gpus) == (full.agent, full.gpus)
            cluster.place(pod, where)
            view.frag.update(where.node)


def test_cpu_cap_counts_gpus_that_cpu_strands():
    """8 free GPUs, CPU for one 12-core half share: FGD sees no fragment, DLC 7.5 GPUs."""
    from dlc.scheduler.allocator import fragscore
    from dlc.scheduler.allocator.shares import MixArrays

    share = MixArrays(WorkloadMix((ShareRequest(12000, 0, 1, 500),), (1.0,)), ["G2"])
    whole = MixArrays(WorkloadMix((ShareRequest(12000, 0, 1, 1000),), (1.0,)), ["G2"])
    state = (np.array([0]), np.array([12000]), np.array([10**6]), np.full((1, 8), 1000))
    fgd_like = fragscore.ScoreParams(cpu_cap="none", granular=False)
    assert fragscore.frag_of(share, *state, params=fgd_like)[0] == 0
    assert fragscore.frag_of(share, *state)[0] == 7500
    # the cap is for shares only: whole-GPU shapes keep FGD's view (measured better on multigpu)
    assert fragscore.frag_of(whole, *state)[0] == 0


def test_scheduler_place_keeps_cpu_beside_free_gpus():
    """fragscore.place (the scheduler's call): a CPU-heavy share avoids the CPU-poor agent."""
    from dlc.scheduler.allocator import fragscore

    views = [
        AgentView("poor", 16000, 64000, "G2", (1000, 1000)),  # 8 cores per GPU
        AgentView("rich", 104000, 64000, "G2", (1000, 1000)),  # 52 cores per GPU
    ]
    heavy_share = ShareRequest(cpu_milli=12000, mem_mib=100, num_gpus=1, gpu_milli=500)
    mix = WorkloadMix((ShareRequest(8000, 0, 1, 1000),), (1.0,))
    got = fragscore.place(heavy_share, views, mix)
    assert got.agent == 1 and got.gpus in ((0,), (1,))
    assert fragscore.place(ShareRequest(200000, 0, 1, 500), views, mix) is None


def test_share_hold_keeps_whole_gpus_from_shares_with_unfillable_leftovers():
    """An 810 share (leftover 190: only the rare 160 shares fit) may not open a whole GPU
    once whole GPUs are scarce; a 470 share (leftover fits another 470) still may."""
    from dlc.scheduler.allocator import fragscore
    from dlc.scheduler.allocator.shares import MixArrays

    shapes = (ShareRequest(3000, 0, 1, 810), ShareRequest(3000, 0, 1, 470))
    shapes += (ShareRequest(3000, 0, 1, 160), ShareRequest(3000, 0, 1, 1000))
    mix = MixArrays(WorkloadMix(shapes, (10.0, 8.0, 1.0, 30.0)), ["G2"])
    assert fragscore.leftover_fill(810, mix) == pytest.approx(1 / 19)
    assert fragscore.leftover_fill(470, mix) == pytest.approx(9 / 19)
    params = fragscore.ScoreParams(hold_reserve=1.0, hold_fill_below=0.1)
    # whole GPUs: 1000 of 2910 free thousandths (34%), under the 71% whole-GPU jobs ask
    scarce = np.array([[1000, 0, 500, 500], [190, 530, 0, 190]])
    plenty = np.array([[1000, 1000, 1000, 1000], [1000, 0, 0, 190]])  # 5000 of 5190
    hold = fragscore.share_hold(810, scarce, mix, params)
    assert hold is not None and np.isinf(hold[0, 0]) and np.isinf(hold).sum() == 1
    assert fragscore.share_hold(470, scarce, mix, params) is None
    assert fragscore.share_hold(810, plenty, mix, params) is None
    assert fragscore.share_hold(810, scarce, mix, fragscore.DEFAULT_PARAMS) is None
    # the reserve scales with the whole-GPU part of the demand: 30000 of 42020 thousandths
    assert fragscore.whole_demand(mix) == pytest.approx(30000 / 42020)
    only_shares = MixArrays(WorkloadMix(shapes[:3], (10.0, 8.0, 1.0)), ["G2"])
    assert fragscore.share_hold(810, scarce, only_shares, params) is None


def test_dlc_admit_never_opens_a_whole_gpu_for_a_held_share(openb):
    """Through a replay, once whole GPUs are a scarce part of the free capacity, no
    unfillable share takes one."""
    from dlc.scheduler.allocator.fragscore import leftover_fill, whole_demand

    nodes, pods = _slice(openb, n_nodes=60, n_pods=400)
    mix, policy = target_mix(pods), get_policy("dlc-admit")
    total = sum(n.gpus for n in nodes) * 1000
    seen = {"held": 0, "placed": 0}

    def checked(pod, view, rng):
        where = policy(pod, view, rng)
        gpu_left = view.cluster.gpu_left
        keep = policy.params.hold_reserve * whole_demand(policy._mix)
        scarce = (gpu_left == 1000).sum() * 1000 < keep * gpu_left.sum()
        if pod.is_share and scarce:
            unfillable = leftover_fill(pod.gpu_milli, policy._mix) < policy.params.hold_fill_below
            if unfillable:
                seen["held"] += 1
                assert where is None or gpu_left[where.node, where.gpus[0]] < 1000
            elif where is not None:
                seen["placed"] += 1
        return where

    rng = np.random.default_rng(3)
    replay(nodes, arrival_sequence(pods, total, 1.3, rng), checked, mix, rng)
    assert seen["held"] > 0 and seen["placed"] > 0


def test_policy_names_take_a_hold_reserve_and_refuse_bad_ones_in_one_line():
    from dlc.sim.policies import check_policy, label

    assert get_policy("dlc-admit:1.5").params.hold_reserve == 1.5
    assert get_policy("dlc-admit").params.hold_reserve == 1.0
    assert get_policy("dlc-arrays").params.hold_reserve == 0.0
    assert label("dlc-admit:1.5") == "DLC + share hold x1.5"
    for bad in ("dlc-admit:x", "dlc-admit:0", "fgd:2", "nope"):
        with pytest.raises(FieldError) as err:
            check_policy(bad)
        assert "--policy" in str(err.value) and "\n" not in str(err.value)
