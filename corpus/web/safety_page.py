"""The page-safety model of web_safety_v3: a linear model over word unigrams and bigrams (optional: the
shipped model has none) and the word list's term counts, scored over ~100-word windows of a page; trained on real labelled text
(corpus/web/safety_train.py; the manifest beside the artifact names the data and the settings).

A window's logit is
    z = b + (sum of the weights of its unigrams and bigrams) / n + lex . log1p(term counts) + p . peer
over its n words (the page-safety tokens of corpus/web/safety_terms.py, so obfuscations are resolved):
- n-gram weights: one weight per word and word pair of the vocabulary; the vocabulary keeps only the
  n-grams that occur in several training sources, so a source's own vocabulary (names, topics of one
  forum) cannot carry the decision for it;
- term counts: the tiered word list's explicit and context terms per category in the window, as
  features with learned weights (not as rules), so a category that has little labelled text (sexual)
  still has evidence; one more count for explicit terms of any category carries a weight learned from
  the categories with labelled text to the others (a count of the LDNOOBW list's words was tried as well:
  it raised the therapy answers' scores, so the thresholds, and lowered recall);
- clinical words: the count of the project's clinical and counselling words (clinical_en.txt: therapist,
  patient, symptoms, feelings, consent, ...) in the window. Therapy answers and medical text talk about sex,
  abuse and self-harm in that register; the weight is learned from the health sources the model trains on
  (v6; measured leave one source out, it raised every recall row and lowered health false drops, docs/web.md);
- hedging words: the count of the project's hedging, advice and supportive words (hedging_en.txt: may, perhaps,
  often, suggest, consider, help, cope, options, ...) in the window (v7). Advice and explanation hedge; abuse
  asserts. Its weight is learned too (measured leave one source out: all-unsafe recall +1.7 to +3.2 points and
  health false drops -0.8 to -0.9 points over v6 across four training seeds, docs/web.md);
- peer: the mean over the window's words of alt-profanity-check's probability for the 50-word block
  each word is in (peer_probs), another general signal from a model trained on other data.
The page's score is the geometric mean of its worst window's P(unsafe) and the P(unsafe) of the same model
over the worst window's context: the CONTEXT words around it (the whole page when it is shorter). One
window alone over-fires on long safe pages: a therapy answer or a clinical text has a ~100-word stretch the
peer scores high, and the page's worst window is the maximum of many chances. Measured leave one source out
(docs/web.md), the context lowers health false drops and, through the lower threshold it allows, raises
every recall row. The context is bounded, so one bad section of a long web page is diluted at most
CONTEXT / WINDOW times, not by the page's length. A page of up to WINDOW words is one window (and its own
context). (v8) That geometric mean is multiplied by (1 + s) / 2, where s is the share of the windows lying
inside the context whose P(unsafe) is above 0.5 (the model's decision boundary, the threshold's floor): a
stretch that only one window of its context calls unsafe (a therapy answer quoting the asker) scores up to
half as much as the same stretch in text that is unsafe throughout, while a page of one window (most short
posts) keeps its score. Measured leave one source out, it lowered health false drops and, through the lower
thresholds it allows, raised every recall row (docs/web.md); the context stays bounded, so does the dilution.
A second head (same features) names the worst window's category. Scoring is a dict lookup per word, a sorted-array
search for the word pairs, then prefix sums, so every window costs O(1) and no model library runs.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import safety_terms

MODEL_PATH = Path(__file__).resolve().parent / "models" / "safety_page_v8.npz"
# How a page's score is made from its windows (module docstring), recorded in every manifest: a model file whose
# threshold was chosen for another rule is refused (v8: the context's share of windows above 0.5 is a factor)
SCORE_RULE = "v8: sqrt(worst window x context) x (1 + share of the context's windows with P(unsafe) > 0.5) / 2"
WINDOW = 100  # words; training units are 50-150 words (corpus/web/safety_units.py)
STRIDE = 50
# words around the worst window scored as its context (module docstring): 300 in v6 (v5: 200); measured leave one
# source out with the clinical-word feature, 300 words raised every recall row ~2 points and lowered health false
# drops (docs/web.md); bounded, so one bad section is diluted at most 3x however long the page
CONTEXT = 300
# (category, tier) term counts, then explicit terms of any category, clinical words (safety_terms.clinical_words)
# and (v7) hedging words (safety_terms.hedging_words)
N_LEX = 2 * len(safety_terms.CATEGORIES) + 3
EXPLICIT, CLINICAL, HEDGING = N_LEX - 3, N_LEX - 2, N_LEX - 1  # their columns
BLOCK = 50  # words per block the peer model (alt-profanity-check) scores
_MODELS: dict[str, "PageModel"] = {}


@dataclass(frozen=True)
class PageModel:
    words: dict[str, int]  # word -> row of `uni` (unigrams of the vocabulary and the words of its bigrams)
    uni: np.ndarray  # [W + 1] unigram weights (last: unknown word, 0)
    pairs: np.ndarray  # [B] sorted bigram keys: first word's row * (W + 1) + second word's row
    bi: np.ndarray  # [B + 1] bigram weights (last: a pair not in the vocabulary, 0)
    lex_weight: np.ndarray  # [N_LEX + 1]: term counts, then the peer's probability
    intercept: float
    categories: tuple[str, ...]
    cat_uni: np.ndarray  # [W + 1, K]
    cat_bi: np.ndarray  # [B + 1, K]
    cat_lex: np.ndarray  # [N_LEX + 1, K]
    cat_intercept: np.ndarray  # [K]
    threshold: float

    @property
    def unknown(self) -> int:
        return len(self.words)

    @classmethod
    def of_ngrams(cls, weights: dict[str, np.ndarray], **rest) -> "PageModel":
        """From {unigram "w" or bigram "a b": [1 + K] weights (unsafe head, category heads)}."""
        words: dict[str, int] = {}
        for g in weights:
            for w in g.split(" "):
                words.setdefault(w, len(words))
        k = len(rest["categories"])
        uni = np.zeros((len(words) + 1, 1 + k))
        bigrams = {}
        for g, v in weights.items():
            parts = g.split(" ")
            if len(parts) == 1:
                uni[words[g]] = v
            else:
                bigrams[words[parts[0]] * (len(words) + 1) + words[parts[1]]] = v
        pairs = np.array(sorted(bigrams), np.int64)
        bi = np.vstack([np.array([bigrams[p] for p in pairs.tolist()]).reshape(len(pairs), 1 + k), np.zeros((1, 1 + k))])
        return cls(words=words, uni=uni[:, 0].copy(), pairs=pairs, bi=bi[:, 0].copy(), cat_uni=uni[:, 1:].copy(),
                   cat_bi=bi[:, 1:].copy(), **rest)

    def ngram_weights(self) -> dict[str, np.ndarray]:
        """The inverse of of_ngrams."""
        names = sorted(self.words, key=self.words.get)
        out = {w: np.concatenate([[self.uni[i]], self.cat_uni[i]]) for i, w in enumerate(names)}
        out = {w: v for w, v in out.items() if v.any()}  # words that only occur in bigrams
        for j, key in enumerate(self.pairs.tolist()):
            a, b = divmod(key, len(self.words) + 1)
            out[f"{names[a]} {names[b]}"] = np.concatenate([[self.bi[j]], self.cat_bi[j]])
        return out


@dataclass(frozen=True)
class PageScore:
    score: float  # sqrt(window * context): the page's score (module docstring)
    start: int  # worst window, word positions [start, end)
    end: int
    category: str | None  # category head at the worst window (None for an empty page)
    window: float = 0.0  # the worst window's P(unsafe)
    context: float = 0.0  # P(unsafe) of the context [context_start, context_end) around it
    context_start: int = 0
    context_end: int = 0
    share: float = 1.0  # (v8) the share of the windows inside the context whose P(unsafe) is above 0.5


def save(path: Path, arrays: dict[str, np.ndarray], manifest: dict) -> str:
    """Write the weights (.npz, no pickle) and the manifest (.json, with the weights' sha256); return the digest."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    path.with_suffix(".json").write_text(json.dumps({**manifest, "sha256": digest}, indent=1) + "\n", encoding="utf-8")
    _MODELS.pop(str(path), None)
    return digest


def from_arrays(z, threshold: float) -> PageModel:
    words = [str(w) for w in z["words"]]
    if len(z["lex_weight"]) != N_LEX + 1:
        raise ValueError(f"{len(z['lex_weight'])} feature weights, this code scores {N_LEX + 1} (an older model "
                         f"version; retrain with `python -m corpus.web.safety_train`)")
    return PageModel(
        words={w: i for i, w in enumerate(words)}, uni=np.append(np.asarray(z["uni"], np.float64), 0.0),
        pairs=np.asarray(z["pairs"], np.int64), bi=np.append(np.asarray(z["bi"], np.float64), 0.0),
        lex_weight=np.asarray(z["lex_weight"], np.float64), intercept=float(z["intercept"]),
        categories=tuple(str(c) for c in z["categories"]),
        cat_uni=np.vstack([np.asarray(z["cat_uni"], np.float64), np.zeros((1, len(z["categories"])))]),
        cat_bi=np.vstack([np.asarray(z["cat_bi"], np.float64), np.zeros((1, len(z["categories"])))]),
        cat_lex=np.asarray(z["cat_lex"], np.float64), cat_intercept=np.asarray(z["cat_intercept"], np.float64),
        threshold=float(threshold))


def to_arrays(model: PageModel) -> dict[str, np.ndarray]:
    """The arrays `from_arrays` reads (float32 weights; the unknown rows are not stored)."""
    return {"words": np.array(sorted(model.words, key=model.words.get), dtype=str),
            "uni": model.uni[:-1].astype(np.float32), "pairs": model.pairs, "bi": model.bi[:-1].astype(np.float32),
            "lex_weight": model.lex_weight.astype(np.float32), "intercept": np.float32(model.intercept),
            "categories": np.array(model.categories, dtype=str), "cat_uni": model.cat_uni[:-1].astype(np.float32),
            "cat_bi": model.cat_bi[:-1].astype(np.float32), "cat_lex": model.cat_lex.astype(np.float32),
            "cat_intercept": model.cat_intercept.astype(np.float32)}


def load(path: Path | str = MODEL_PATH) -> PageModel:
    """The model and its manifest's threshold; a changed or truncated file is an error naming it."""
    path = Path(path)
    key = str(path)
    if key not in _MODELS:
        manifest_path = path.with_suffix(".json")
        if not path.is_file() or not manifest_path.is_file():
            raise FileNotFoundError(f"safety model {path} or its manifest {manifest_path.name} is missing; make them with "
                                    f"`python -m corpus.web.safety_train --data FOLDER`")
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("page_score_rule") != SCORE_RULE:
            raise ValueError(f"{manifest_path}: its threshold was chosen for the page-score rule "
                             f"{manifest.get('page_score_rule')!r}, this code scores {SCORE_RULE!r} (an older model "
                             f"version; retrain with `python -m corpus.web.safety_train`)")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != manifest.get("sha256"):
            raise ValueError(f"{path} does not match the sha256 in {manifest_path.name} (changed or truncated)")
        try:
            with np.load(path) as z:
                _MODELS[key] = from_arrays(z, manifest["threshold"])
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{path}: not a page-safety model of corpus/web/safety_page.py ({exc})") from None
    return _MODELS[key]


def ngram_ids(toks: list[str], model: PageModel) -> tuple[np.ndarray, np.ndarray]:
    """(row of each word in `uni` [n], row of each word pair in `bi` [n]): pair i is (i-1, i); position 0
    has none. One dict lookup per word; the pairs are found with numpy (sorted keys)."""
    get, unknown = model.words.get, model.unknown
    none = len(model.pairs)
    if not model.words:   # a model without n-gram weights (the shipped one): every word is unknown
        return np.zeros(len(toks), np.int64), np.full(len(toks), none, np.int64)
    uni = np.array([get(t, unknown) for t in toks], np.int64)
    bi = np.full(len(toks), none, np.int64)
    if len(toks) > 1 and none:
        keys = uni[:-1] * (unknown + 1) + uni[1:]
        at = np.minimum(np.searchsorted(model.pairs, keys), none - 1)
        bi[1:] = np.where(model.pairs[at] == keys, at, none)
    return uni, bi


def lex_positions(toks: list[str], lex: safety_terms.Lexicon, found: list | None = None) -> np.ndarray:
    """[n, N_LEX] one-hot of the list term (category, tier) starting at each word, a column for an
    explicit term of any category (a weight learned from the categories that have labelled text carries
    over to one that has little), one for a clinical word and one for a hedging word. `found`:
    safety_terms.hits of the tokens, when already known."""
    out = np.zeros((len(toks), N_LEX), np.int32)
    for pos, cat, tier in (safety_terms.hits(toks, lex) if found is None else found):
        out[pos, 2 * cat + tier] += 1
        out[pos, EXPLICIT] += tier == 0
    clinical, hedging = safety_terms.clinical_words(), safety_terms.hedging_words()
    either = _either(clinical, hedging)
    if not either.isdisjoint(toks):
        at = [i for i, t in enumerate(toks) if t in either]  # one pass over the page for both lists
        out[[i for i in at if toks[i] in clinical], CLINICAL] = 1
        out[[i for i in at if toks[i] in hedging], HEDGING] = 1
    return out


@lru_cache(maxsize=4)
def _either(clinical: frozenset, hedging: frozenset) -> frozenset:
    return clinical | hedging


def peer_probs(pages: list[list[str]]) -> list[np.ndarray]:
    """Per page, [n] the peer model's P(profane) of the block each word is in. alt-profanity-check (a
    scikit-learn model trained on ~200k labelled comments, in its PyPI package) is one more general signal;
    it runs once per block over all pages at once, so its cost is one pass over the text. Its probabilities come
    from corpus/web/peer_profanity.py: equal to the package's, without scikit-learn's import in every process."""
    from .peer_profanity import predict_prob_words

    texts = [[t[i:i + BLOCK] for i in range(0, len(t), BLOCK)] for t in pages]  # BLOCK-word blocks
    flat = [b for bs in texts for b in bs]
    probs = predict_prob_words(flat) if flat else np.zeros(0)
    out, at = [], 0
    for toks, bs in zip(pages, texts):
        out.append(np.repeat(probs[at:at + len(bs)], BLOCK)[:len(toks)].astype(np.float64))
        at += len(bs)
    return out


def window_bounds(n: int, window: int = WINDOW, stride: int = STRIDE) -> np.ndarray:
    """[w, 2] start/end of the windows: one for a page of up to `window` words; else every `stride`
    words, the last one ending at the page's end."""
    if n <= window:
        return np.array([[0, n]], np.int64)
    starts = np.arange(0, n - window + 1, stride)
    if starts[-1] + window < n:
        starts = np.append(starts, n - window)
    return np.stack([starts, starts + window], 1)


def _prefix(values: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros((1,) + values.shape[1:], values.dtype), np.cumsum(values, axis=0)])


def _prefixes(ids: tuple[np.ndarray, np.ndarray], lexpos: np.ndarray, peer: np.ndarray, model: PageModel) -> tuple:
    """Running sums over the page of its word and pair weights, term counts and peer probabilities: a window's
    sums are then two lookups each. Made once per page, for its windows, its context and its category."""
    return _prefix(model.uni[ids[0]]), _prefix(model.bi[ids[1]]), _prefix(lexpos), _prefix(peer)


def _window_sums(pu: np.ndarray, pb: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Sum of the n-gram weights inside each window [s, e): its words and the pairs wholly inside it."""
    return (pu[e] - pu[s]) + (pb[e] - pb[np.minimum(s + 1, e)])


def _features(counts: np.ndarray, mean: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """[w, N_LEX + 1] per window: log1p of its term counts, the mean peer probability of its words."""
    n = np.maximum(e - s, 1)
    return np.hstack([np.log1p(counts[e] - counts[s]), ((mean[e] - mean[s]) / n)[:, None]])


def window_logits(ids: tuple[np.ndarray, np.ndarray], lexpos: np.ndarray, peer: np.ndarray, model: PageModel,
                  bounds: np.ndarray, *, sums: tuple | None = None) -> np.ndarray:
    """The logit of each window [start, end) (module docstring). `sums`: the page's `_prefixes`, if made."""
    pu, pb, counts, mean = sums or _prefixes(ids, lexpos, peer, model)
    s, e = bounds[:, 0], bounds[:, 1]
    n = np.maximum(e - s, 1).astype(np.float64)
    return model.intercept + _window_sums(pu, pb, s, e) / n + _features(counts, mean, s, e) @ model.lex_weight


def category_of(ids: tuple[np.ndarray, np.ndarray], lexpos: np.ndarray, peer: np.ndarray, model: PageModel,
                start: int, end: int, *, sums: tuple | None = None) -> str:
    n = max(end - start, 1)
    uni, bi = ids
    counts, mean = (sums or _prefixes(ids, lexpos, peer, model))[2:]
    z = model.cat_intercept + (model.cat_uni[uni[start:end]].sum(0) + model.cat_bi[bi[start + 1:end]].sum(0)) / n \
        + _features(counts, mean, np.array([start]), np.array([end]))[0] @ model.cat_lex
    return model.categories[int(np.argmax(z))]


def context_bounds(n: int, start: int, end: int, context: int = CONTEXT) -> tuple[int, int]:
    """The `context` words centred on the window [start, end), moved inside the page [0, n); the whole
    page when it is shorter."""
    if n <= context:
        return 0, n
    lo = max(0, (start + end) // 2 - context // 2)
    lo = min(lo, n - context)
    return lo, lo + context


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(float(z), 50.0), -50.0)))


def score_tokens(toks: list[str], model: PageModel, lex: safety_terms.Lexicon,
                 lexpos: np.ndarray | None = None, peer: np.ndarray | None = None) -> PageScore:
    """The page's score from its worst window and that window's context; `lexpos` and `peer` (peer_probs)
    are computed here when not given."""
    if not toks:
        p = _sigmoid(model.intercept)
        return PageScore(p, 0, 0, None, p, p)
    ids = ngram_ids(toks, model)
    lexpos = lex_positions(toks, lex) if lexpos is None else lexpos
    peer = peer_probs([toks])[0] if peer is None else peer
    bounds = window_bounds(len(toks))
    sums = _prefixes(ids, lexpos, peer, model)
    z = window_logits(ids, lexpos, peer, model, bounds, sums=sums)
    worst = int(np.argmax(z))
    start, end = int(bounds[worst, 0]), int(bounds[worst, 1])
    cs, ce = context_bounds(len(toks), start, end)
    p_window = _sigmoid(z[worst])
    p_context = p_window if (cs, ce) == (start, end) else \
        _sigmoid(window_logits(ids, lexpos, peer, model, np.array([[cs, ce]], np.int64), sums=sums)[0])
    inside = (bounds[:, 0] >= cs) & (bounds[:, 1] <= ce)  # the worst window is always among them
    share = float(np.mean(z[inside] > 0.0))  # P(unsafe) > 0.5
    return PageScore(math.sqrt(p_window * p_context) * (1.0 + share) / 2.0, start, end,
                     category_of(ids, lexpos, peer, model, start, end, sums=sums), p_window, p_context, cs, ce, share)


def top_words(toks: list[str], model: PageModel, start: int, end: int, k: int = 5) -> list[str]:
    """The window's distinct words and word pairs of highest positive weight (the evidence a drop carries
    besides the list terms), highest first."""
    uni, bi = ngram_ids(toks[start:end], model)
    weights = {t: model.uni[u] for t, u in zip(toks[start:end], uni)}
    weights.update({f"{toks[start + i - 1]} {toks[start + i]}": model.bi[b] for i, b in enumerate(bi) if i})
    return [g for g, w in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])) if w > 0][:k]
