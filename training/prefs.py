"""Preference pairs for the reward model and DPO: readers for the pair formats, pair tokenization and the
per-sequence log-probability of a response.

Formats (`format` of a data source; `auto` looks at the keys):
- llamafactory: {conversations: ShareGPT prompt turns, chosen: {from, value}, rejected: {from, value}};
- hh_rlhf: {chosen, rejected}: whole dialogues "\\n\\nHuman: ...\\n\\nAssistant: ..."; the prompt is the
  turns before the last assistant turn, which must be the same in both;
- alpaca_eval: {instruction, output_1, output_2, preference in [1, 2]}: the preferred output is the winner and
  the strength |2·(preference − 1.5)| maps to a preference level (RMConfig.strength_thresholds); exact ties
  are dropped (counted);
- graded: {messages, chosen, rejected, grades_chosen: {property: class}, grades_rejected: {...}, level?}.
Binary sources (no strength) get `binary_level` (default 1, "better", p = 0.85).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import torch

from .chat import Tokenized, chat_format, record_error, render

_HH_TURN = re.compile(r"\n\n(Human|Assistant): ")


@dataclass
class Pair:
    prompt: list[dict]
    chosen: str
    rejected: str
    level: int
    grades_chosen: dict = field(default_factory=dict)
    grades_rejected: dict = field(default_factory=dict)
    source: str = ""


def _hh_turns(text: str, where: str) -> list[dict]:
    parts = _HH_TURN.split(text)
    if len(parts) < 3 or parts[0].strip():
        raise record_error(where, "not an hh-rlhf dialogue ('\\n\\nHuman: ... \\n\\nAssistant: ...')")
    return [{"role": "user" if who == "Human" else "assistant", "content": body}
            for who, body in zip(parts[1::2], parts[2::2])]


def detect_format(rec: dict) -> str:
    if "conversations" in rec and isinstance(rec.get("chosen"), dict):
        return "llamafactory"
    if "preference" in rec and "output_1" in rec:
        return "alpaca_eval"
    if "grades_chosen" in rec:
        return "graded"
    if isinstance(rec.get("chosen"), str) and "\n\nHuman: " in rec["chosen"]:
        return "hh_rlhf"
    return "unknown"


def level_of_strength(strength: float, thresholds) -> int:
    for k, t in enumerate(thresholds):
        if strength >= t:
            return k
    return len(thresholds)


def record_pair(rec: dict, *, fmt: str, where: str, thresholds=(0.9, 0.6, 0.3), binary_level: int = 1,
                source: str = "") -> Pair | None:
    """A Pair, or None for a record that carries no preference (an alpaca_eval tie). A record without a field
    its format needs (`rejected`, `chosen`, ...) or with one of the wrong type is a RecordError naming it."""
    try:
        return _record_pair(rec, fmt=fmt, where=where, thresholds=thresholds, binary_level=binary_level,
                            source=source)
    except KeyError as exc:
        raise record_error(where, f"no {exc.args[0]!r} field (format {fmt})") from None
    except (TypeError, AttributeError, ValueError) as exc:
        raise record_error(where, f"a field has the wrong type for format {fmt} ({exc})") from None


def _record_pair(rec: dict, *, fmt: str, where: str, thresholds, binary_level: int, source: str) -> Pair | None:
    from .chat import _sharegpt_turn

    fmt = detect_format(rec) if fmt == "auto" else fmt
    if fmt == "llamafactory":
        prompt = [_sharegpt_turn(t, where) for t in rec["conversations"]]
        return Pair(prompt, str(rec["chosen"]["value"]), str(rec["rejected"]["value"]), binary_level, source=source)
    if fmt == "hh_rlhf":
        c, r = _hh_turns(rec["chosen"], where), _hh_turns(rec["rejected"], where)
        if c[-1]["role"] != "assistant" or r[-1]["role"] != "assistant" or c[:-1] != r[:-1]:
            raise record_error(where, "chosen and rejected do not share the prompt before the last assistant turn")
        return Pair(c[:-1], c[-1]["content"], r[-1]["content"], binary_level, source=source)
    if fmt == "alpaca_eval":
        pref = rec.get("preference")
        if not isinstance(pref, (int, float)) or not 1 <= pref <= 2:
            raise record_error(where, f"preference {pref!r} is not a number in [1, 2]")
        if pref == 1.5:
            return None
        win, lose = ("output_2", "output_1") if pref > 1.5 else ("output_1", "output_2")
        level = level_of_strength(abs(2 * (pref - 1.5)), thresholds)
        return Pair([{"role": "user", "content": rec["instruction"]}], rec[win], rec[lose], level, source=source)
    if fmt == "graded":
        return Pair(list(rec["messages"]), rec["chosen"], rec["rejected"], int(rec.get("level", binary_level)),
                    dict(rec["grades_chosen"]), dict(rec["grades_rejected"]), source=source)
    raise record_error(where, f"unknown preference format (keys {sorted(rec)[:8]}); set the source's format")


def tokenize_response(prompt: list[dict], response: str, tokenizer, *, budget: int) -> Tokenized:
    """Prompt turns + assistant header (no loss) then the response and its end marker (loss). Longer than
    `budget` tokens: the response keeps at most budget - 16 tokens, the prompt is cut from the left."""
    fmt = chat_format(tokenizer)
    p_ids: list[int] = []
    for _, header, body in render(prompt, fmt=fmt):
        p_ids += tokenizer.encode(header) + tokenizer.encode(body)
    p_ids += tokenizer.encode(fmt.open("assistant"))
    r_ids = tokenizer.encode(response + fmt.end)
    cut = len(p_ids) + len(r_ids) > budget
    r_ids = r_ids[: budget - 16]
    p_ids = p_ids[-(budget - len(r_ids)):]
    ids = np.asarray(p_ids + r_ids, dtype=np.int64)
    trainable = np.asarray([False] * len(p_ids) + [True] * len(r_ids), dtype=bool)
    return Tokenized(ids, trainable, cut)


def sequence_logps(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over the response (mask) of log p(label) per row: [B]."""
    from .losses import cross_entropies

    (ce,) = cross_entropies(logits, [labels])
    return -(ce * mask).sum(-1)


@dataclass
class PairItem:
    pair: Pair
    chosen: Tokenized
    rejected: Tokenized


def load_pairs(cfg, tokenizer) -> tuple[list[PairItem], list[PairItem], dict]:
    """Tokenized (train, held-out) pairs of every source, split and weighted as SFT data are."""
    from manifests.errors import RecordError

    from .post_loop import read_records, split_and_weight

    rm = cfg.rm
    thresholds = rm.strength_thresholds if rm else (0.9, 0.6, 0.3)
    binary = rm.binary_level if rm else 1
    per_source, counters = [], {"records": 0, "ties_dropped": 0, "identical_dropped": 0, "malformed_dropped": 0,
                                 "cut": 0}
    for src in cfg.data.sources:
        if src.dataset:  # a dataset version in the catalog: its rows are the pair records
            from manifests import Catalog

            version = Catalog(cfg.data.root).resolve(src.dataset)
            records = version.read().to_pylist()[: src.max_records]
            label = f"{version.name}@{version.version_id[:12]}"
            counters.setdefault("versions", []).append(f"{version.name}@{version.version_id}")
        else:
            records = read_records(src.path)[: src.max_records]
            label = src.path
        items = []
        for i, rec in enumerate(records):
            counters["records"] += 1
            where = f"{label} record {i}"
            try:
                pair = record_pair(rec, fmt=src.format, where=where, thresholds=thresholds, binary_level=binary,
                                   source=label)
            except RecordError as exc:  # e.g. an hh-rlhf pair whose two dialogues differ before the last turn
                counters["malformed_dropped"] += 1
                counters.setdefault("first_malformed", str(exc))
                continue
            if pair is None:
                counters["ties_dropped"] += 1
                continue
            if pair.chosen == pair.rejected:
                counters["identical_dropped"] += 1
                continue
            c = tokenize_response(pair.prompt, pair.chosen, tokenizer, budget=cfg.seq_length + 1)
            r = tokenize_response(pair.prompt, pair.rejected, tokenizer, budget=cfg.seq_length + 1)
            counters["cut"] += int(c.truncated or r.truncated)
            items.append(PairItem(pair, c, r))
        if not items:
            raise RecordError(label, "-", f"no usable preference pair in {len(records)} records")
        per_source.append(items)
    train, valid = split_and_weight(per_source, cfg)
    return train, valid[: cfg.valid_max], counters


def pair_batch(items: list[PairItem], seq_length: int, pad_id: int, *, thd: bool = False) -> dict[str, torch.Tensor]:
    """Rows 0..n-1 the chosen responses, n..2n-1 the rejected ones; one sequence per row, padded."""
    from .packing import _assemble, collate

    packs = [_assemble([(0, it.chosen.ids, it.chosen.trainable)], seq_length, pad_id) for it in items]
    packs += [_assemble([(0, it.rejected.ids, it.rejected.trainable)], seq_length, pad_id) for it in items]
    batch = collate(packs, thd=thd)
    batch["last_index"] = torch.tensor([sum(p.lengths) - 1 for p in packs])  # last real position per row
    batch["level"] = torch.tensor([it.pair.level for it in items])
    return batch


# USR Topical-Chat gradings (UniEval's packaging): several systems' responses to the same dialogue, each
# graded by annotators (averaged). Classes per property: round the mean to the scale's nearest step.
USR_GRADES = {"understandability": (0, 1), "naturalness": (1, 3), "coherence": (1, 3), "engagingness": (1, 3),
              "groundedness": (0, 1)}


def usr_graded_pairs(records: list[dict], *, level_gaps=(2.0, 1.0, 0.5), where: str = "usr") -> list[dict]:
    """`graded` pair records from single-sided Likert gradings: every two responses to the same dialogue
    whose `overall` means differ by at least the last gap; the level is the first gap the difference
    reaches (2.0 -> significantly better ... 0.5 -> slightly better); grades per property become classes."""
    by_dialogue: dict[str, list[dict]] = {}
    for i, r in enumerate(records):
        if "scores" not in r or "overall" not in r["scores"]:
            raise record_error(f"{where} record {i}", "no scores.overall")
        by_dialogue.setdefault(r["source"] + "\x00" + r.get("context", ""), []).append(r)
    out = []
    for rs in by_dialogue.values():
        for a in range(len(rs)):
            for b in range(a + 1, len(rs)):
                x, y = rs[a], rs[b]
                gap = x["scores"]["overall"] - y["scores"]["overall"]
                if abs(gap) < level_gaps[-1] or x["system_output"] == y["system_output"]:
                    continue
                win, lose = (x, y) if gap > 0 else (y, x)
                level = next(k for k, g in enumerate(level_gaps) if abs(gap) >= g)
                prompt = ((f"Fact: {win.get('context', '')}\n" if win.get("context") else "")
                          + f"Dialogue so far: {win['source']}\nReply to the dialogue.")
                out.append({"messages": [{"role": "user", "content": prompt}], "chosen": win["system_output"],
                            "rejected": lose["system_output"], "level": level,
                            "grades_chosen": _usr_classes(win["scores"]),
                            "grades_rejected": _usr_classes(lose["scores"])})
    return out


def _usr_classes(scores: dict) -> dict:
    return {k: int(round(scores[k])) - lo for k, (lo, _) in USR_GRADES.items() if k in scores}
