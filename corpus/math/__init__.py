"""Math corpus: tag and symbol signals, Q&A extraction, MathML to LaTeX, the math classifier."""
