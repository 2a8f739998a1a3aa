"""Tool-use SFT generation (AFM 4.1.2 / 5.3): single-tool examples from real function-calling
dialogues, LLM-bootstrapped requests, distractor tools, parallel calls, tool-intent negatives, and a
JSON-schema validator every call must pass."""
