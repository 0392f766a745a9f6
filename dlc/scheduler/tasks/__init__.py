"""Tasks: a placed task's life (pure).

``launch`` (what the core hands an engine to start a task), ``states`` (the task vocabulary
and one status update), ``refusals`` (resources the master refused), ``infra_loss`` (ends
that are the infrastructure's fault), ``draining`` (GPUs held until an ended task is gone),
``usage`` (allocated versus used, as the executor measured it).
"""
