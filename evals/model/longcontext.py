"""Long context."""
TASKS = {}
