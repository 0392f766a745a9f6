"""Gangs: multi-node jobs (pure).

``topology`` (where agents stand in the network, which a gang should share), ``elastic``
(``--nodes MIN:MAX``), ``rendezvous`` (how a gang's nodes find each other).
"""
