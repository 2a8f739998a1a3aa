"""Math SFT generation (AFM 4.1.2 / 5.3): rephrase, reversion, evolution, solvability and difficulty
judging, chain-of-thought answers checked against a ground truth or a majority vote."""
