"""GPU vendors behind one seam: one folder per vendor, one registration line each.

See :mod:`dlc.devices.base` for what a backend provides and :mod:`dlc.devices.registry`
for where a new vendor is registered (docs/architecture.md, "Adding a GPU vendor").
"""
