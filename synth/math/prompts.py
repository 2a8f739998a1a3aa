"""Math prompt templates (our own wording, versioned)."""

from synth.generation.template import PromptTemplate

REPHRASE = PromptTemplate(
    id="math_rephrase", version="v1",
    system="You rewrite math word problems. Keep every number and the question asked; change only the wording.",
    user="Rewrite this problem in different words. Keep all numbers exactly. Write only the new problem.\n\n"
         "Problem: {question}\n\nRewritten problem:",
)

EVOLVE_DEPTH = PromptTemplate(
    id="math_evolve_depth", version="v1",
    system="You write math word problems for students.",
    user="Here is a math problem:\n{question}\n\nWrite one new problem that is harder: it needs one more "
         "reasoning step or one more condition. Write only the new problem, ending with a question.",
)

EVOLVE_BREADTH = PromptTemplate(
    id="math_evolve_breadth", version="v1",
    system="You write math word problems for students.",
    user="Here is a math problem:\n{question}\n\nWrite one new problem of similar difficulty about a different "
         "everyday topic. Write only the new problem, ending with a question.",
)

SOLVABLE = PromptTemplate(
    id="math_solvable_judge", version="v1",
    system="You check math problems. Answer with one word: yes or no.",
    user="Can this problem be solved with the information it gives, with a single numeric answer?\n\n"
         "Problem: {question}\n\nAnswer yes or no:",
)

DIFFICULTY = PromptTemplate(
    id="math_difficulty_judge", version="v1",
    system="You rate math problems. Reply with 'Rating: N', N from 1 (trivial) to 10 (very hard).",
    user="How hard is this problem for a high-school student?\n\nProblem: {question}\n\nRating:",
)

COT = PromptTemplate(
    id="math_cot_answer", version="v1",
    system="You solve math problems step by step. End with a line 'The answer is N.'",
    user="{question}\n\nSolve it step by step.",
)
