"""Probes: the reference GPT and its trainer (small real trainings that tell which data is worth scaling)."""
