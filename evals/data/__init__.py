"""Data evaluations; each module is one `cidermill eval data NAME`."""
