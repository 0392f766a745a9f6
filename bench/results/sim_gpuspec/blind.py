"""Attribution: several allowed models honoured, the mix model-blind (as before the fix)."""
import runpy, sys
root = sys.argv[1]
sys.path.insert(0, root)
import dlc.sim.policies.engine as engine
engine.shape_models = lambda spec: ()
sys.argv = ["sim_engine_knobs.py", *sys.argv[2:]]
runpy.run_path(f"{root}/bench/sim_engine_knobs.py", run_name="__main__")
