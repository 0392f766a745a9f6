import sys, numpy as np
from pathlib import Path
from collections import Counter
from dlc.sim import io
from dlc.sim.workload import arrival_sequence, target_mix
from dlc.sim.replay import replay
from dlc.sim.policies import engine
from dlc.sim.cluster import ClusterState
trace, seed = sys.argv[1], int(sys.argv[2])
root = Path('/work/shared/traces')
nodes = io.load_nodes(root); pods = io.load_pods(root, trace)
total = sum(n.gpus for n in nodes) * 1000
rng = np.random.default_rng(seed)
arr = arrival_sequence(pods, total, 1.3, rng)
mix = target_mix(pods)
pol = engine.EnginePolicy()
bad = Counter(); placed_multi = 0
def wrapped(pod, view, rng):
    global placed_multi
    w = pol(pod, view, rng)
    if w is not None and pod.gpu_models:
        m = view.cluster.model_names[int(view.cluster.model[w.node])]
        if m not in pod.gpu_models: bad[(tuple(sorted(pod.gpu_models)), m)] += 1
        if len(pod.gpu_models) > 1: placed_multi += 1
    return w
r = replay(nodes, arr, wrapped, mix, rng)
print('placed', r.placed, 'failed', len(r.failed), 'multi placed', placed_multi, 'violations', sum(bad.values()), dict(bad))
# failures by demand fraction and constraint
arrived = r.arrived_gpu_milli
for cut in (0.52, 0.7, 0.96, 1.3):
    fails = [i for i in r.failed if arrived[i+1] <= cut*total]
    c = Counter('|'.join(sorted(arr[i].gpu_models)) or '-' for i in fails)
    g = Counter()
    for i in fails: g['|'.join(sorted(arr[i].gpu_models)) or '-'] += arr[i].total_gpu_milli
    print(f'{cut:.0%} fails {len(fails)} gpu {sum(g.values())/1000:.0f}', sorted(((k,c[k],g[k]//1000) for k in c), key=lambda x:-x[2])[:8])
cl = ClusterState(nodes)
print('nodes by model', Counter(cl.model_names[int(m)] for m in cl.model), 'gpus by model', {cl.model_names[k]: int(cl.gpu_count[cl.model==k].sum()) for k in range(len(cl.model_names))})
ca = Counter('|'.join(sorted(p.gpu_models)) or '-' for p in arr)
print('arrivals by spec', ca.most_common(12))
