"""Jobs: what a user asks for (:mod:`~dlc.scheduler.jobs.spec`) and the job record.

``spec`` with ``spec_fields`` (one parser per field), ``spec_rules`` (checked again on the
agent) and ``spec_admission`` (checks against the operator's settings); ``job`` (:class:`Job`,
its states); ``queue`` (order and reservations); ``launch_spec`` (what one task runs: the
scheduler-executor contract).
"""
