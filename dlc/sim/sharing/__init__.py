"""Sharing-cost simulator: backends' measured throughput, faults and their blast radius."""
