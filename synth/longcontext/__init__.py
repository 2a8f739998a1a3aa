"""Long-context Q&A for the context-lengthening mixture (AFM 3.2.3): a question answerable from one
span of one document, placed among distractor documents up to a target length."""
