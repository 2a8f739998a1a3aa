"""Agreement of the two kept sets, and a named rule for every document one side keeps and the other does not.

Where both pipelines have the rule (language, Gopher, C4, FineWeb), the difference is checked, not assumed:
our stages are run on datatrove's own text of that document. If they decide as datatrove did, the rules agree
and the texts differ (extraction); if not, the document is counted under "rules disagree" (none expected:
benchmarks/web_quality.py shows identical decisions on identical text). Duplicates are explained with the
input's duplicate groups (the input builder records which records are copies of which page).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

# our stages that have a datatrove counterpart, in pipeline order (the text stages of configs/web.yaml)
SHARED_RULES = ["normalize_text_v1", "web_lang_v1", "lang_filter_v1", "gopher_repetition_v1", "gopher_quality_v1",
                "c4_quality_v1", "fineweb_quality_v1"]
PEER_STEP_OF = {"lang": "lang_filter_v1", "gopher_rep": "gopher_repetition_v1",
                "gopher_qual": "gopher_quality_v1", "c4": "c4_quality_v1", "fineweb_qual": "fineweb_quality_v1"}
DEDUP = {"url_dedup", "exact_dedup", "minhash_dedup"}  # by family
# Our stages FineWeb's pipeline has no counterpart for, by family (the name without its `_vN`), so that a new
# version of a stage (safety v3's reasons, a PII v4) is named by its own rejects' reason, not by a list of one
# version's reasons: why a document that datatrove keeps is not in ours.
OUR_ONLY = {
    "http_response": "keeps HTTP 200 HTML only; datatrove's reader does not read the HTTP status",
    "web_extract": "no text from our extractor; trafilatura found some",
    "read": "our WARC reader skipped the record; datatrove's read it",
    "web_safety_filter": "FineWeb's pipeline has no safety filter",
    "pii": "strong card/SSN/IBAN evidence drops; datatrove's PIIFormatter only redacts emails and IPs",
    "decontaminate": "FineWeb's pipeline has no decontamination",
    "quality_classifier_filter": "FineWeb's pipeline has no model-based quality filter",
}
_VERSION = re.compile(r"_v\d+$")
_GROUPING_KEYS = ("category", "kind", "rule")


def our_only_rule(stage: str, reason: str, detail: str = "") -> str:
    """The named rule for a document our `stage` dropped with `reason` (and `detail`, its drop_detail JSON)
    where FineWeb's pipeline has no such stage: any version of a known family is explained, its reason named
    as its rejects give it (`model_profanity`, `safety:self_harm`), with the evidence's category or kind."""
    family = _VERSION.sub("", stage or "")
    why = OUR_ONLY.get(family)
    if why is None:
        return f"ours {stage} ({reason}) (unexplained)"
    return f"ours {stage} ({reason}{_evidence(detail)}): {why}"


def _evidence(detail: str) -> str:
    """`; key=value` for the fields of a drop_detail JSON object that name a kind of evidence (the category
    of a safety drop, the kind of PII), which a reason alone may not say; not hosts, scores or words, which
    differ by document and would split a rule into one line per document."""
    try:
        found = json.loads(detail) if detail else None
    except ValueError:
        return ""
    if not isinstance(found, dict):
        return ""
    return "".join(f"; {k}={found[k]}" for k in _GROUPING_KEYS if isinstance(found.get(k), (str, int)))


def _our_text_stages(config: Path, normalize: bool):
    from corpus.pipeline import load_pipeline

    stages = load_pipeline(str(config), overrides={"input.paths": ["/dev/null"]}).stages
    return [s for s in stages if s.name in SHARED_RULES and (normalize or s.name != "normalize_text_v1")]


def recheck(texts: dict[str, tuple[str, str]], config: Path, *, normalize: bool = True
            ) -> dict[str, tuple[str, str] | None]:
    """id -> (our stage, reason) where our text stages drop datatrove's text (`texts`: id -> (text, url)),
    None where they keep it. `normalize=False` leaves out normalize_text_v1 (our whitespace clean-up, which
    datatrove does not do before its filters)."""
    import pyarrow as pa

    if not texts:
        return {}
    ids = list(texts)
    table = pa.table({"id": ids, "text": [texts[i][0] for i in ids], "url": [texts[i][1] for i in ids]})
    verdict: dict[str, tuple[str, str] | None] = dict.fromkeys(ids)
    for stage in _our_text_stages(config, normalize):
        result = stage(table)
        if result.rejects is not None:
            for rid, reason in zip(result.rejects.column("id").to_pylist(),
                                   result.rejects.column("drop_reason").to_pylist()):
                verdict[rid] = (stage.name, reason)
        table = result.table
    return verdict


def _lang_whole_text(text: str) -> tuple[str | None, float]:
    """Our language id (same lid.176.ftz model) on the whole text, as datatrove reads it, not our first
    4,000 characters."""
    from corpus.stages.web_lang import identify

    return identify(text, max_chars=len(text) + 1)


def explain(records: list[dict], ours: tuple[dict, dict], peer: tuple[dict, dict], *,
            peer_lost: dict[str, str], config: Path) -> dict:
    """Both kept sets compared; every difference named. `peer_lost`: id -> why datatrove had no document
    (its reader skipped it, or trafilatura gave no text / timed out)."""
    ours_kept, ours_dropped = ours
    peer_kept, peer_dropped = peer
    group_of = {r["id"]: r["group"] for r in records}
    url_of = {r["id"]: r["url"] for r in records}
    members = defaultdict(list)
    for r in records:
        members[r["group"]].append(r["id"])
    a, b = set(ours_kept), set(peer_kept)
    both = a & b
    out = {"input": len(records), "ours_kept": len(a), "peer_kept": len(b), "both": len(both),
           "ours_only": len(a - b), "peer_only": len(b - a), "jaccard": len(both) / max(len(a | b), 1)}

    # what our rules do with datatrove's text, for every difference where both sides have the rule
    to_check = {i: (peer_dropped[i][2], url_of.get(i, "")) for i in a - b if i in peer_dropped
                and peer_dropped[i][0] in PEER_STEP_OF}
    to_check |= {i: (peer_kept[i], url_of.get(i, "")) for i in b - a
                 if ours_dropped.get(i, ("",))[0] in SHARED_RULES}
    ours_on_peer_text = recheck(to_check, config)
    raw_peer_text = recheck(to_check, config, normalize=False)
    normalized = ("normalize_text_v1 before the filters: our whitespace clean-up (max_blank_lines 1, spaces "
                  "collapsed) changes the line statistics; on datatrove's text as it is, our rule decides as "
                  "datatrove's")

    reasons: dict[str, list[str]] = defaultdict(list)
    for i in sorted(a - b):  # we keep, datatrove does not
        if i in peer_dropped:
            step, why, text = peer_dropped[i]
            if step == "url":
                reasons[f"datatrove URLFilter ({why}): its URL block list; ours has none (most listed adult "
                        "domains are weak evidence in our safety filter, needing sexual words on the page)"].append(i)
            elif step == "minhash":
                kept_peer = [m for m in members[group_of.get(i, -1)] if m in b]
                reasons["datatrove MinHash kept another copy of this page (ours keeps the first in input order)"
                        if kept_peer else
                        "datatrove MinHash matched it to a page ours does not see as a near duplicate "
                        "(its 14x8 bands on normalised words vs our 16x7 bands verified at Jaccard 0.7)"].append(i)
            else:
                ours_says = ours_on_peer_text.get(i)
                if ours_says is not None:
                    reasons[f"extraction differs: datatrove's text fails {step} ({why}); so does it in ours "
                            f"({ours_says[0]}: {ours_says[1]}); our text passes"].append(i)
                elif step != "lang" and raw_peer_text.get(i) is not None:
                    reasons[f"{normalized} ({step}: {why})"].append(i)
                elif step == "lang":
                    lang, score = _lang_whole_text(text)
                    fails = lang != "en" or score < 0.65
                    reasons["language id input: datatrove reads the whole text, ours the first 4,000 characters "
                            "(same model; on the whole text ours fails too)" if fails else
                            "rules disagree: language (unexplained)"].append(i)
                else:
                    reasons[f"rules disagree: {step} ({why}) (unexplained)"].append(i)
        else:
            reasons[f"datatrove lost it before its filters: {peer_lost.get(i, 'not found in its outputs')}"].append(i)

    for i in sorted(b - a):  # datatrove keeps, we do not
        stage, why, _detail = ours_dropped.get(i, ("?", "not found in our outputs", ""))
        if stage in SHARED_RULES:
            ours_says = ours_on_peer_text.get(i)
            if ours_says is None:
                reasons[f"extraction differs: our text fails {stage} ({why}); datatrove's text passes ours too"].append(i)
            elif stage == "lang_filter_v1":
                lang, score = _lang_whole_text(peer_kept[i])
                ok = lang == "en" and score >= 0.65
                reasons["language id input: ours reads the first 4,000 characters, datatrove the whole text "
                        "(same model; on the whole text ours passes too)" if ok else
                        "rules disagree: language (unexplained)"].append(i)
            elif raw_peer_text.get(i) is None:
                reasons[f"{normalized} ({stage}: {why})"].append(i)
            else:
                reasons[f"rules disagree: ours {stage} ({why}) drops datatrove's text too (unexplained)"].append(i)
        elif _VERSION.sub("", stage) in DEDUP:
            kept_peer = [m for m in members[group_of.get(i, -1)] if m in b]
            reasons[f"ours {stage} ({why}); datatrove " + (
                "kept another copy of this page instead" if len(kept_peer) == 1 else
                f"kept {len(kept_peer)} copies of this page (its MinHash did not match them)")].append(i)
        else:
            reasons[our_only_rule(stage, why, _detail)].append(i)

    out["reasons"] = [{"rule": rule, "n": len(ids), "sample": ids[0], "url": url_of.get(ids[0], "")}
                      for rule, ids in sorted(reasons.items(), key=lambda kv: -len(kv[1]))]
    out["unexplained"] = sum(len(ids) for rule, ids in reasons.items() if "unexplained" in rule)
    out["text_overlap_median"] = _median_overlap({i: (ours_kept[i], peer_kept[i]) for i in both})
    return out


def _median_overlap(pairs: dict[str, tuple[str, str]]) -> float | None:
    """Median Jaccard of word 4-gram sets of the two texts of each document both keep."""
    vals = []
    for x, y in pairs.values():
        sx, sy = _shingles(x), _shingles(y)
        if sx or sy:
            vals.append(len(sx & sy) / len(sx | sy))
    vals.sort()
    return vals[len(vals) // 2] if vals else None


def _shingles(text: str) -> set:
    w = re.findall(r"\w+", text.lower())
    return {" ".join(w[k:k + 4]) for k in range(max(len(w) - 3, 1))} if w else set()


def peer_lost(warc_files: list[str], seen: set[str]) -> dict[str, str]:
    """Why datatrove had no document for a record that is in none of its outputs: its reader skipped it
    (not HTML by the payload type, or undecodable), or trafilatura returned nothing / timed out."""
    from datatrove.pipeline.readers.warc import process_record
    from warcio.archiveiterator import ArchiveIterator

    lost = {}
    for path in warc_files:
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "response":
                    continue
                rid = record.rec_headers["WARC-Record-ID"].strip("<>").removeprefix("urn:uuid:")
                if rid in seen:
                    continue
                lost[rid] = ("its WARC reader skipped it (not HTML, or undecodable)" if process_record(record) is None
                             else "trafilatura (favour_precision) returned no text, or hit datatrove's 1 s timeout")
    return lost


def load_records(path: Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def print_agreement(res: dict, *, samples: int = 1) -> None:
    print(f"\nagreement of the kept sets ({res['input']:,} input records): ours keeps {res['ours_kept']:,}, "
          f"datatrove {res['peer_kept']:,}, both {res['both']:,} (Jaccard {res['jaccard']:.3f}; "
          f"{res['both'] / max(res['ours_kept'], 1):.1%} of ours, {res['both'] / max(res['peer_kept'], 1):.1%} "
          f"of datatrove's); ours only {res['ours_only']:,}, datatrove only {res['peer_only']:,}")
    if res["text_overlap_median"] is not None:
        print(f"  documents both keep: median word 4-gram Jaccard of the two texts {res['text_overlap_median']:.2f}")
    print(f"  every difference, by rule ({res['unexplained']} unexplained):")
    for r in res["reasons"]:
        print(f"  {r['n']:6,}  {r['rule']}")
        print(f"          e.g. {r['sample']}  {r['url'][:100]}")
