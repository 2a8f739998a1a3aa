"""iTeC (AFM report 4.3.2): iterative teaching committee.

Each round:
1. every committee member (SFT, RS, DPO/IPO, RL checkpoints: whatever the config names, plus the members
   trained in earlier rounds) samples `samples_per_member` responses per prompt with the rollout generator;
2. every response gets the reward of its prompt type (training/rewards: the RM, plus rule rewards where the
   type has them) and its log-probability under the reference (the first member);
3. prompt-level reranking over all members' responses: the best one per prompt becomes rejection-sampling
   SFT data, the best and the worst a preference pair for DPO/IPO (when their rewards differ by more than
   `selection.min_margin`); prompts that give neither are counted by reason;
4. the round is published as one catalog version `itec-<name>` (one row per response: its member, reward,
   components, reference log-prob, and whether it was picked as best / worst), with the RS and pair files
   beside it in `<out_dir>/round-<k>/`;
5. before the next round, `refresh` trains new members from the reference on this round's data (RS-SFT,
   DPO or IPO) and adds them to the committee.

Caching: rollouts, rewards and reference log-probs are stored under keys hashed from what determines them
(the prompt set's fingerprint, the member's checkpoint manifest, the generation settings and round seed; the
reward config and RM; the reference); a trained member lives under its data's fingerprint. A rerun of the
same config therefore loads everything and makes no model call (`ITeCResult.model_calls`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from manifests.errors import ConfigError
from manifests.manifest import PipelineInfo, config_hash

from .itec_config import ITeCConfig, Member, RefreshStep

ROW_SCHEMA = pa.schema([
    ("round", pa.int32()), ("prompt_id", pa.string()), ("prompt_type", pa.string()), ("messages", pa.string()),
    ("tools", pa.string()), ("member", pa.string()), ("member_checkpoint", pa.string()), ("sample", pa.int32()),
    ("response", pa.string()), ("n_response_tokens", pa.int32()), ("finish_reason", pa.string()),
    ("reward", pa.float64()), ("reward_components", pa.string()), ("reward_detail", pa.string()),
    ("member_logprob", pa.float64()),
    ("reference_logprob", pa.float64()), ("is_best", pa.bool_()), ("is_worst", pa.bool_()),
])


@dataclass
class ModelCalls:
    generate: int = 0  # generate() calls (one per member and round on a cache miss)
    reference: int = 0  # teacher-forced reference passes
    reward_model: int = 0  # RM forward passes
    training: int = 0  # members trained

    @property
    def total(self) -> int:
        return self.generate + self.reference + self.reward_model + self.training


@dataclass
class RoundResult:
    round: int
    version: str  # name@version_id
    committee: list[str]
    mean_reward: float
    mean_reward_by_member: dict[str, float]
    mean_best_reward: float
    counters: dict
    rs_path: str
    pairs_path: str


@dataclass
class ITeCResult:
    rounds: list[RoundResult] = field(default_factory=list)
    model_calls: ModelCalls = field(default_factory=ModelCalls)
    members: list[Member] = field(default_factory=list)


def _key(obj) -> str:
    return config_hash(obj)[:20]


def load_prompts(cfg: ITeCConfig) -> list[dict]:
    from . import prompt_sets as ps

    rows = []
    for src in cfg.prompts:
        n = None if src.limit is None else src.skip + src.limit
        if src.kind == "gsm8k" and _rl_prompt_file(src.path):
            got = rl_math_prompts(src.path, limit=n)
        elif src.kind == "gsm8k":
            got = ps.gsm8k_prompts(src.path, limit=n)
        elif src.kind == "preference":
            got = ps.preference_prompts(src.path, fmt=src.format, limit=n)
        elif src.kind == "instructions":
            got = ps.with_instructions(ps.preference_prompts(src.path, fmt=src.format, limit=n))
        elif src.kind == "code":
            got = ps.code_prompts(src.path, limit=n)
        else:
            got = ps.glaive_tool_prompts(src.path, limit=n)
        rows += got[src.skip:]
    return rows


def _rl_prompt_file(path) -> bool:
    """Whether a math prompt file holds RL prompt records (training/rl_tasks: `messages` + `answer`) rather
    than GSM8K rows (`question` + `answer` ending '#### N')."""
    from .post_loop import read_records

    recs = read_records(path)
    return bool(recs) and "question" not in recs[0] and ("messages" in recs[0] or "conversations" in recs[0])


def rl_math_prompts(path, *, limit: int | None = None) -> list[dict]:
    """RL prompt records (the verifiable tasks of training/rl_tasks, e.g. the addition prompts) as math
    prompts, their turns verbatim (no GSM8K answer-format suffix: the policy answers as it was SFT'd to) and
    the record's `answer` as the math rule's reference."""
    from .chat import record_error, record_messages
    from .post_loop import read_records

    rows = []
    for i, rec in enumerate(read_records(path)[:limit]):
        where = f"{path} record {i}"
        messages, tools = record_messages(rec, where=where)
        answer = str(rec.get("answer", "")).strip()
        if not answer:
            raise record_error(where, "no `answer` to check responses against")
        if messages[-1]["role"] == "assistant":
            raise record_error(where, "the prompt's last turn is an assistant turn; give the turns before the answer")
        rows.append({"id": f"math-{i}", "type": "math", "messages": messages, "tools": tools,
                     "reference": {"answer": answer}})
    return rows


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows))
    tmp.replace(path)


class _Members:
    """Loads a member's policy only on a cache miss, one at a time."""

    def __init__(self, max_length: int):
        self.max_length, self._name, self._policy = max_length, None, None

    def policy(self, member: Member):
        if self._name != member.checkpoint:
            from .rollout import load_policy

            self._policy, self._name = None, None
            self._policy, self._name = load_policy(member.checkpoint, max_length=self.max_length), member.checkpoint
        return self._policy


def _rollouts(cfg, k, member, prompts, prompt_ids, members, calls, cache: Path, prompts_fp: str) -> tuple[list, str]:
    from .dpo import reference_id
    from .rollout import generate

    g = cfg.generation
    key = _key(["rollouts-v1", prompts_fp, reference_id(member.checkpoint), asdict(g), cfg.samples_per_member, k,
                member.name])
    path = cache / "rollouts" / f"{key}.jsonl"
    if path.exists():
        return _read_jsonl(path), key
    order = [(i, j) for i in range(len(prompts)) if prompt_ids[i] is not None for j in range(cfg.samples_per_member)]
    seed = int(_key([g.seed, k, member.name])[:8], 16)
    kw = {"max_new_tokens": g.max_new_tokens, "temperature": g.temperature, "top_p": g.top_p, "seed": seed}
    batch = [prompt_ids[i] for i, _ in order]
    if g.backend == "vllm":  # pragma: no cover - GPU only: one engine per member, freed before the next
        from .checkpoint import open_checkpoint
        from .rollout.policy import policy_tokenizer, stop_sequences
        from .rollout.vllm_backend import VLLMRollouts

        tok = policy_tokenizer(open_checkpoint(member.checkpoint))
        engine = VLLMRollouts(member.checkpoint, work_dir=cache / "vllm" / member.name,
                              max_model_len=g.max_prompt_tokens + g.max_new_tokens)
        outs = engine.generate(batch, stop=stop_sequences(tok), eos_id=int(getattr(tok, "eod_id", 0)), **kw)
        del engine
        decode = tok.decode
    else:
        policy = members.policy(member)
        outs = generate(policy.model, batch, stop=policy.stop_sequences(), eos_id=policy.eos_id,
                        max_batch_size=g.max_batch_size, **kw)
        decode = policy.decode
    calls.generate += 1
    rows = [{"prompt": i, "sample": j, "response_ids": o.response_ids, "text_len": len(o.text_ids()),
             "response": decode(o.text_ids()), "finish_reason": o.finish_reason,
             "member_logprob": float(sum(o.logprobs))} for (i, j), o in zip(order, outs)]
    _write_jsonl(path, rows)
    return rows, key


def _rewards(cfg, samples, prompts, rollout_key, scorer, calls, cache: Path) -> list[dict]:
    from .dpo import reference_id

    rm_id = reference_id(cfg.rewards.rm_checkpoint) if cfg.rewards.rm_checkpoint else None
    key = _key(["rewards-v1", rollout_key, asdict(cfg.rewards), rm_id])
    path = cache / "rewards" / f"{key}.jsonl"
    if path.exists():
        return _read_jsonl(path)
    before = getattr(scorer.rm(), "calls", 0) if cfg.rewards.uses_rm({p["type"] for p in prompts}) else 0
    scored = scorer.score([prompts[s["prompt"]] for s in samples], [s["response"] for s in samples])
    if cfg.rewards.uses_rm({p["type"] for p in prompts}):
        calls.reward_model += scorer.rm().calls - before
    rows = [{"reward": s["reward"], "components": s["components"], "detail": s["detail"]} for s in scored]
    _write_jsonl(path, rows)
    return rows


def _reference_logprobs(cfg, member, samples, prompt_ids, rollout_key, members, calls, cache: Path) -> list[float]:
    from .dpo import reference_id
    from .rollout.score import response_logprobs

    reference = cfg.committee[0]
    if member.checkpoint == reference.checkpoint:  # the generator returned these log-probs already
        return [s["member_logprob"] for s in samples]
    key = _key(["reflogp-v1", rollout_key, reference_id(reference.checkpoint)])
    path = cache / "reflogp" / f"{key}.jsonl"
    if path.exists():
        return [r["reference_logprob"] for r in _read_jsonl(path)]
    policy = members.policy(reference)
    lps = response_logprobs(policy.model, [(prompt_ids[s["prompt"]], s["response_ids"]) for s in samples],
                            micro_batch=cfg.generation.max_batch_size)
    calls.reference += 1
    out = [float(x.sum()) for x in lps]
    _write_jsonl(path, [{"reference_logprob": x} for x in out])
    return out


def select(prompts: list[dict], rows: list[dict], *, min_margin: float, min_best_reward: float | None):
    """Prompt-level reranking. rows: one per response with prompt (index), member_rank, sample, reward,
    response. Marks is_best / is_worst in place; returns (rs records, pair records, counters)."""
    by_prompt: dict[int, list[dict]] = {}
    for r in rows:
        r["is_best"] = r["is_worst"] = False
        by_prompt.setdefault(r["prompt"], []).append(r)
    rs, pairs = [], []
    counters = {"prompts": len(prompts), "prompts_sampled": len(by_prompt), "rs_rows": 0, "pairs": 0,
                "best_below_min_reward": 0, "best_empty": 0, "pair_within_margin": 0}
    for i in sorted(by_prompt):
        cands = sorted(by_prompt[i], key=lambda r: (-r["reward"], r["member_rank"], r["sample"]))
        best, worst = cands[0], cands[-1]
        p = prompts[i]
        if not best["response"].strip():
            counters["best_empty"] += 1
            continue
        best["is_best"] = True
        if min_best_reward is not None and best["reward"] < min_best_reward:
            counters["best_below_min_reward"] += 1
        else:
            rs.append({"messages": p["messages"] + [{"role": "assistant", "content": best["response"]}],
                       "tools": p.get("tools"), "prompt_id": p["id"], "member": best["member"],
                       "reward": best["reward"]})
        if best["reward"] - worst["reward"] > min_margin:
            worst["is_worst"] = True
            pairs.append({"messages": p["messages"], "chosen": best["response"], "rejected": worst["response"],
                          "grades_chosen": {}, "grades_rejected": {}, "level": 1, "prompt_id": p["id"],
                          "chosen_member": best["member"], "rejected_member": worst["member"],
                          "chosen_reward": best["reward"], "rejected_reward": worst["reward"]})
        else:
            counters["pair_within_margin"] += 1
    counters["rs_rows"], counters["pairs"] = len(rs), len(pairs)
    return rs, pairs, counters


def _train_member(cfg: ITeCConfig, k: int, step: RefreshStep, data_path: Path, calls: ModelCalls, log) -> Member | None:
    from manifests.errors import ManifestError

    from .checkpoint import open_checkpoint
    from .export_hf import tokenizer_spec
    from .post_config import from_dict

    records = _read_jsonl(data_path)
    if len(records) < 2:
        log(f"[itec] round {k}: {step.method} refresh skipped: {len(records)} record(s) in {data_path}")
        return None
    reference = open_checkpoint(cfg.committee[0].checkpoint)
    rcfg = reference.manifest.get("config") or {}
    shape = dict(reference.manifest["model_shape"])
    name = f"{step.method if step.method == 'sft' else step.loss}-r{k}"
    data_fp = _key([step.method, step.loss, step.beta, step.steps, asdict(cfg.train),
                    hashlib.sha256(data_path.read_bytes()).hexdigest(),
                    hashlib.sha256((reference.directory / "checkpoint.json").read_bytes()).hexdigest()])
    out_dir = Path(cfg.out_dir) / "members" / f"{name}-{data_fp}"
    try:  # trained by an earlier run on the same data: reuse it
        return Member(name=name, checkpoint=str(open_checkpoint(out_dir).directory))
    except ManifestError:
        pass
    t = cfg.train
    optim = dict(rcfg.get("optim") or {"name": "afm_rmsprop"})
    optim.update(peak_lr=t.peak_lr, warmup_steps=min(3, step.steps))
    raw = {"name": f"{cfg.name}-{name}", "method": step.method,
           "model": {"shape": shape.pop("name"), **shape}, "tokenizer": tokenizer_spec(reference),
           "data": {"sources": [{"path": str(data_path), **({"format": "graded"} if step.method == "dpo" else {})}],
                    "valid_fraction": t.valid_fraction, "seed": t.seed},
           "seq_length": t.seq_length, "optim": optim, "global_batch": t.global_batch, "micro_batch": t.micro_batch,
           "steps": step.steps, "seed": t.seed, "init_from": str(reference.directory), "out_dir": str(out_dir),
           "log_every": 0, "rotary_base": int(reference.manifest.get("rotary_base", 500_000))}
    if step.method == "dpo":
        raw["dpo"] = {"loss": step.loss, "beta": step.beta, "cache_dir": str(Path(cfg.out_dir) / "cache" / "dpo-ref")}
        from .dpo import train_dpo as trainer
    else:
        from .sft import train_sft as trainer
    result = trainer(from_dict(raw, where=f"itec refresh {name}"), log=lambda *_: None)
    calls.training += 1
    log(f"[itec] round {k}: trained member {name} ({step.method}, {step.steps} steps) -> {result.checkpoint}")
    return Member(name=name, checkpoint=str(result.checkpoint))


def run_itec(cfg: ITeCConfig, *, log=print, scorer=None) -> ITeCResult:
    from manifests.manifest import code_revision
    from manifests.catalog import Catalog

    from .checkpoint import open_checkpoint
    from .rewards import RewardScorer
    from .rollout.policy import chat_prompt_ids, policy_tokenizer

    result = ITeCResult()
    calls = result.model_calls
    cache = Path(cfg.out_dir) / "cache"
    prompts = load_prompts(cfg)
    tokenizer = policy_tokenizer(open_checkpoint(cfg.committee[0].checkpoint))
    prompt_ids = []
    for p in prompts:
        ids = chat_prompt_ids(p["messages"], tokenizer, tools=p.get("tools"))
        prompt_ids.append(ids if len(ids) <= cfg.generation.max_prompt_tokens else None)
    prompts_fp = _key([prompts, [len(x) if x else None for x in prompt_ids]])
    if scorer is None:
        if cfg.rewards.uses_rm({p["type"] for p in prompts}) and not cfg.rewards.rm_checkpoint:
            raise ConfigError(f"{cfg.name}: rewards.weights use the reward model (rm) but rewards.rm_checkpoint "
                              "is unset")
        scorer = RewardScorer(cfg.rewards)
    members = _Members(cfg.generation.max_prompt_tokens + cfg.generation.max_new_tokens)
    committee = list(cfg.committee)
    catalog, parent = Catalog(cfg.root), []
    try:
        for k in range(1, cfg.rounds + 1):
            rows = []
            for rank, member in enumerate(committee):
                samples, rkey = _rollouts(cfg, k, member, prompts, prompt_ids, members, calls, cache, prompts_fp)
                rewards = _rewards(cfg, samples, prompts, rkey, scorer, calls, cache)
                ref = _reference_logprobs(cfg, member, samples, prompt_ids, rkey, members, calls, cache)
                for s, rw, lp in zip(samples, rewards, ref):
                    rows.append({**s, **rw, "member": member.name, "member_checkpoint": member.checkpoint,
                                 "member_rank": rank, "reference_logprob": lp})
            rs, pairs, counters = select(prompts, rows, min_margin=cfg.selection.min_margin,
                                         min_best_reward=cfg.selection.min_best_reward)
            counters["prompts_too_long"] = sum(x is None for x in prompt_ids)
            counters["math_answer_by_last_number"] = sum(  # the math rule's fallback extraction, counted
                (r.get("detail") or {}).get("math", {}).get("extracted") == "last number" for r in rows)
            round_dir = Path(cfg.out_dir) / f"round-{k}"
            _write_jsonl(round_dir / "rs.jsonl", rs)
            _write_jsonl(round_dir / "pairs.jsonl", pairs)
            by_member = {m.name: _mean([r["reward"] for r in rows if r["member"] == m.name]) for m in committee}
            mean_reward = _mean([r["reward"] for r in rows])
            mean_best = _mean([r["reward"] for r in rows if r["is_best"]])
            table = pa.Table.from_pylist([_table_row(k, prompts[r["prompt"]], r) for r in rows], schema=ROW_SCHEMA)
            described = {"config": cfg.to_dict(), "round": k, "committee": [asdict(m) for m in committee]}
            version = catalog.write_table(
                f"itec-{cfg.name}", table, parents=parent, schema=ROW_SCHEMA,
                pipeline=PipelineInfo(name="itec", stages=[{"name": "itec_round_v1", "config": described}],
                                      config=described, code_revision=code_revision(),
                                      config_sha256=config_hash(described)),
                extra={"kind": "dataset", "itec_round": k, "committee": [m.name for m in committee],
                       "prompts_fingerprint": prompts_fp, "counters": counters, "mean_reward": mean_reward,
                       "mean_reward_by_member": by_member, "mean_best_reward": mean_best,
                       "rs_file": str(round_dir / "rs.jsonl"), "pairs_file": str(round_dir / "pairs.jsonl")})
            parent = [version.version_id]
            ref = f"{version.name}@{version.version_id[:12]}"
            result.rounds.append(RoundResult(k, ref, [m.name for m in committee], mean_reward, by_member, mean_best,
                                             counters, str(round_dir / "rs.jsonl"), str(round_dir / "pairs.jsonl")))
            log(f"[itec] round {k}: committee {', '.join(m.name for m in committee)}; {len(rows)} responses to "
                f"{counters['prompts_sampled']} prompts; mean reward {mean_reward:.4f} (by member: " +
                ", ".join(f"{n} {v:.4f}" for n, v in by_member.items()) + f"); best per prompt {mean_best:.4f}; "
                f"{counters['rs_rows']} RS rows, {counters['pairs']} pairs -> {ref}")
            if k < cfg.rounds:
                for step in cfg.refresh:
                    path = round_dir / ("rs.jsonl" if step.method == "sft" else "pairs.jsonl")
                    new = _train_member(cfg, k, step, path, calls, log)
                    if new is not None:
                        committee.append(new)
    finally:
        if hasattr(scorer, "close"):
            scorer.close()
    result.members = committee
    return result


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def _table_row(k: int, p: dict, r: dict) -> dict:
    return {"round": k, "prompt_id": p["id"], "prompt_type": p["type"],
            "messages": json.dumps(p["messages"], ensure_ascii=False),
            "tools": json.dumps(p.get("tools"), ensure_ascii=False), "member": r["member"],
            "member_checkpoint": r["member_checkpoint"], "sample": r["sample"], "response": r["response"],
            "n_response_tokens": len(r["response_ids"]), "finish_reason": r["finish_reason"], "reward": r["reward"],
            "reward_components": json.dumps(r["components"], sort_keys=True),
            "reward_detail": json.dumps(r.get("detail", {}), sort_keys=True, ensure_ascii=False, default=str),
            "member_logprob": r["member_logprob"],
            "reference_logprob": r["reference_logprob"], "is_best": r["is_best"], "is_worst": r["is_worst"]}
