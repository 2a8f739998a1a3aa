"""Post-training tasks (filled below)."""
TASKS = {}
