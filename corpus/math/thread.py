"""What the Q&A and forum extractors return: a question (or a thread's first post) and its answers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Answer:
    text: str
    score: int | None
    accepted: bool


@dataclass
class QA:
    title: str
    question: str
    answers: list[Answer] = field(default_factory=list)
    kind: str = "qa"  # "qa" (question and answers) or "forum" (first post and replies, in thread order)

    def best_first(self) -> list[Answer]:
        return sorted(self.answers, key=lambda a: (not a.accepted, -(a.score or 0)))

    def to_text(self, *, max_answers: int | None = None) -> str:
        parts = [self.title, self.question] if self.title else [self.question]
        if self.kind == "forum":
            parts += [f"Reply:\n{a.text}" for a in self.answers[:max_answers]]
            return "\n\n".join(p for p in parts if p)
        for a in self.best_first()[:max_answers]:
            label = ", ".join(x for x in ("accepted" if a.accepted else "",
                                          f"score {a.score}" if a.score is not None else "") if x)
            parts.append(f"Answer ({label}):\n{a.text}" if label else f"Answer:\n{a.text}")
        return "\n\n".join(p for p in parts if p)
