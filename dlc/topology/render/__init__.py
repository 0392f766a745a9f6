"""Topology for people and files: text report, SVG/PNG picture, JSON."""
