"""Helpers of the global dedup stages: word tokens and n-gram hashes, MinHash signatures, LSH
banding and connected components, first-occurrence selection for exact keys."""
