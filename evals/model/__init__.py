"""Model evaluation: `cidermill eval model CHECKPOINT --tasks ...` (see cli.py, runner.py)."""
