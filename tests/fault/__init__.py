"""Fault-injection suite: kill DLC's parts at seeded random points of a job stream and count
what went wrong (docs/fault-tolerance.md). ``python -m tests.fault.run --help``."""
