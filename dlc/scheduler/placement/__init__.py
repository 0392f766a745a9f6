"""Placement: which queued job goes on which agent and GPUs (pure).

``placer`` (offers in, launches out: :func:`~dlc.scheduler.placement.placer.place`) with
``model`` (its public types), ``slots`` (an agent's offers as a shrinking slot),
``agent_facts`` (what an agent's attributes say), ``gpu_choice`` (which GPUs of a slot a job
gets) and ``share_launch`` (a share placed as a launch; hold and reservation reasons),
``decide`` (one offer round's decision), ``whole_score`` (whole-GPU agent choice),
``share_placement``/``share_index``/``share_hold``/``share_holders`` (GPU shares),
``frag_state``, ``round_memo``, ``round_cap``, ``shape_cache`` (what rounds keep and bound),
``inventory`` and ``cluster`` (what the cluster has and its one picture), ``consolidation``
(moves that undo fragmentation).
"""
