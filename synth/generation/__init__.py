"""The plumbing every generator shares: the LLM registry and provenance (`llm`), versioned prompt
templates (`template`), the Generator stage base (`generator`) and the in-process runner (`runner`), and sentence embeddings (`embed`)."""
