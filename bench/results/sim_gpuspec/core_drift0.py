"""Experiment: the core with FragCache max_drift 0 (the held mix follows every change)."""

import sys

root = sys.argv[1]
sys.path.insert(0, root)
import dlc.scheduler.placement.frag_state as fs

fs.FragCache.__init__.__defaults__ = (fs.fragscore.DEFAULT_PARAMS, 0.0)
from dlc.cli.main import main

sys.argv = ["dlc", *sys.argv[2:]]
main()
