"""Summary SFT generation (AFM 5.3): payloads from real text (emails, messages, notifications),
teacher summaries, checkable rule filters, a calibrated entailment filter, prompt-injection pairs."""
