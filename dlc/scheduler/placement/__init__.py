"""Placement: which queued job goes on which agent and GPUs (pure).

``placer`` (offers in, launches out: :func:`~dlc.scheduler.placement.placer.place`),
``decide`` (one offer round's decision), ``whole_score`` (whole-GPU agent choice),
``share_placement``/``share_index``/``share_hold``/``share_holders`` (GPU shares),
``frag_state``, ``round_memo``, ``round_cap``, ``shape_cache`` (what rounds keep and bound),
``inventory`` and ``cluster`` (what the cluster has and its one picture), ``consolidation``
(moves that undo fragmentation).
"""
