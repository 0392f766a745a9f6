import sys, numpy as np
from pathlib import Path
from collections import Counter
from dlc.sim import io
from dlc.sim.workload import arrival_sequence, target_mix
from dlc.sim.replay import replay
from dlc.sim.policies import engine, get_policy
trace, seed, model, pol_name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
root = Path('/work/shared/traces')
nodes = io.load_nodes(root); pods = io.load_pods(root, trace)
total = sum(n.gpus for n in nodes) * 1000
rng = np.random.default_rng(seed)
arr = arrival_sequence(pods, total, 1.3, rng)
mix = target_mix(pods)
pol = get_policy(pol_name)
on = Counter(); shown = [0]; so_far=[0]
def wrapped(pod, view, rng):
    so_far[0] += pod.total_gpu_milli
    w = pol(pod, view, rng)
    c = view.cluster
    if w is not None:
        m = c.model_names[int(c.model[w.node])]
        if m == model: on['|'.join(sorted(pod.gpu_models)) or ('-share' if pod.gpu_milli<1000 else '-whole%d'%pod.num_gpu)] += pod.total_gpu_milli
    elif pod.gpu_models == frozenset({model}) and shown[0] < 2:
        shown[0] += 1
        k = c.model_names.index(model); idx = np.flatnonzero(c.model == k)
        print(f'fail at {so_far[0]/total:.0%}: pod cpu {pod.cpu_milli} mem {pod.memory_mib} milli {pod.gpu_milli} x{pod.num_gpu}')
        print('  on', model, 'so far (GPU milli by spec):', on.most_common(8))
        gl = c.gpu_left[idx][:, :2].sum(axis=1)
        print('  nodes', len(idx), 'gpu_left sum', gl.sum(), 'nodes w gpu>=milli', int(((c.gpu_left[idx] >= pod.gpu_milli).sum(axis=1) >= 1).sum()),
              'cpu ok', int((c.cpu_left[idx] >= pod.cpu_milli).sum()), 'mem ok', int((c.mem_left[idx] >= pod.memory_mib).sum()),
              'all ok', int(c.feasible(pod)[idx].sum()))
        print('  cpu_left hist', np.percentile(c.cpu_left[idx], [0,25,50,75,100]), 'gpu_left per node', Counter(gl.tolist()).most_common(6))
    return w
r = replay(nodes, arr, wrapped, mix, rng)
print('placed', r.placed)
