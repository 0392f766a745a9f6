"""DLC: a deep-learning container cloud on Apache Mesos.

The package is layered: ``dlc.topology`` (pure model, parsers, tree) sits at the
bottom; ``dlc.scheduler`` and ``dlc.executor`` build on it; ``dlc.cli`` is the
only layer that talks to a person. Importing any module has no side effects.
"""

__version__ = "0.1.0"
