"""Pieces every generator shares and that work on any SFT dataset: the chat-completion protocol the
generators call, versioned prompt templates, sentence embeddings, embedding dedup and LLM-judge filtering."""
