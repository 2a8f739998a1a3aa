"""Decontamination against evaluation benchmarks: readers of local benchmark files (a registry,
one function per benchmark) and an n-gram index that finds collisions in documents."""
