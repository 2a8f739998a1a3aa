"""Long-context tasks generated locally (no data files): needle-in-a-haystack and RULER-style retrieval.

The haystack is the bundled C4 sample (data/samples/c4, shipped with the repository), cut to a chosen length
in characters; needles are inserted at chosen depths (fraction of the haystack, at a sentence boundary).
    niah:              one needle "The special magic number for {key} is {value}."; ask for key's value.
    ruler_multikey:    four needles with different keys; ask for one (the others distract).
    ruler_multivalue:  four needles with the same key and different values; all four must be returned.
    ruler_vartrack:    a chain "VAR X1 = 12345. VAR X2 = X1. ..." scattered in the haystack; ask which
                       variables hold the value; all of the chain must be named.
Score: the fraction of expected values found in the completion (exact string), averaged over items.
Every item is a pure function of (task, length, depth, seed), recorded in the results manifest.
"""

from __future__ import annotations

import random
from pathlib import Path

LENGTHS = (512, 1024, 2048)  # characters of haystack (= tokens for the byte tokenizer)
DEPTHS = (0.1, 0.5, 0.9)
SEED = 1234


def _haystack(length: int, rng: random.Random) -> str:
    from training.byte_mixture import bundled_c4_texts

    texts = bundled_c4_texts()
    out = ""
    while len(out) < length:
        out += texts[rng.randrange(len(texts))].replace("\n", " ") + " "
    return out[:length]


def _insert(hay: str, needles: list[tuple[float, str]]) -> str:
    for depth, needle in sorted(needles, reverse=True):  # deepest first keeps earlier offsets valid
        pos = int(len(hay) * depth)
        cut = hay.rfind(". ", 0, pos)
        pos = cut + 2 if cut >= 0 else pos
        hay = hay[:pos] + needle + " " + hay[pos:]
    return hay


def make_item(task: str, length: int, depth: float, seed: int) -> dict:
    rng = random.Random(f"{task}-{length}-{depth}-{seed}")
    hay = _haystack(length, rng)
    num = lambda: str(rng.randrange(1_000_000, 9_999_999))  # noqa: E731
    words = ["apple", "river", "candle", "harbor", "violet", "copper", "meadow", "falcon"]
    if task == "niah":
        key, value = rng.choice(words), num()
        text = _insert(hay, [(depth, f"The special magic number for {key} is {value}.")])
        question, expected = f"What is the special magic number for {key}?", [value]
    elif task == "ruler_multikey":
        keys = rng.sample(words, 4)
        values = [num() for _ in keys]
        spots = [depth] + [rng.random() for _ in keys[1:]]
        text = _insert(hay, [(d, f"The special magic number for {k} is {v}.") for d, k, v in zip(spots, keys, values)])
        question, expected = f"What is the special magic number for {keys[0]}?", [values[0]]
    elif task == "ruler_multivalue":
        key = rng.choice(words)
        values = [num() for _ in range(4)]
        spots = [depth] + [rng.random() for _ in values[1:]]
        text = _insert(hay, [(d, f"One of the special magic numbers for {key} is {v}.") for d, v in zip(spots, values)])
        question, expected = f"What are all the special magic numbers for {key}?", values
    elif task == "ruler_vartrack":
        value = str(rng.randrange(10_000, 99_999))
        names = [f"X{rng.randrange(10, 99)}{c}" for c in "ABCD"]
        chain = [f"VAR {names[0]} = {value}."] + [f"VAR {names[i]} = {names[i - 1]}." for i in range(1, 4)]
        spots = sorted([depth] + [rng.random() for _ in chain[1:]])
        text = _insert(hay, list(zip(spots, chain)))
        question, expected = f"Which variables are assigned the value {value}?", names
    else:
        raise ValueError(f"unknown long-context task {task!r}")
    prompt = f"{text}\n\nQuestion: {question}\nAnswer:"
    return {"id": f"{task}-{length}-{depth}", "prompt": prompt, "expected": expected, "length": length,
            "depth": depth}


def run_longcontext(task: str, lm, folder: Path, limit: int | None, *, lengths=LENGTHS, depths=DEPTHS,
                    seed: int = SEED) -> dict:
    items = [make_item(task, n, d, seed) for n in lengths for d in depths]
    items = items[:limit] if limit else items
    outs = lm.generate([it["prompt"] for it in items], max_new_tokens=48, stop=("\n",))
    rows, total = [], 0.0
    for it, out in zip(items, outs):
        found = sum(v in out for v in it["expected"]) / len(it["expected"])
        total += found
        rows.append({"id": it["id"], "length": it["length"], "depth": it["depth"], "output": out, "score": found})
    by_len = {f"score_len{n}": sum(r["score"] for r in rows if r["length"] == n) /
              max(1, sum(r["length"] == n for r in rows)) for n in lengths if any(r["length"] == n for r in rows)}
    return {"task": task, "family": "longcontext", "version": "v1",
            "metrics": {"score": total / max(1, len(items)), **by_len, "n": len(items)}, "samples": rows,
            "generator": {"lengths": list(lengths), "depths": list(depths), "seed": seed,
                          "haystack": "data/samples/c4 (bundled)"},
            "prompt": "{haystack with needles}\\n\\nQuestion: {question}\\nAnswer:"}


TASKS = {t: ("longcontext", (lambda t: lambda lm, f, lim, **kw: run_longcontext(t, lm, f, lim, **kw))(t))
         for t in ("niah", "ruler_multikey", "ruler_multivalue", "ruler_vartrack")}
