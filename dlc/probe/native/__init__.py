"""The native P2P probe's sources as package data (built by :mod:`dlc.probe.runner`)."""
