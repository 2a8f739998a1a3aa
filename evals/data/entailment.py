"""`cidermill eval data entailment`: the summary entailment filter on SummaC's labelled subsets.

The scorer (synth/summaries/entailment.py: logistic regression over lexical consistency features)
is trained on 70% of the documents and its threshold calibrated there for balanced accuracy; the
table reports balanced accuracy on the held-out 30% (split by document), pooled and per subset,
next to a length-only baseline trained and calibrated the same way. The pooled number mixes
subsets with very different base rates; the per-subset and macro rows are the harder test.
"""

from __future__ import annotations

import argparse

from evals.report import EvalReport
from evals.shared import shared_root as shared_data
from synth.summaries.entailment import evaluate

NAME = "entailment"
HELP = "balanced accuracy of the summary entailment filter on held-out SummaC vs a length-only baseline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--summac", default=str(shared_data() / "summarization" / "summac_subsets"))
    parser.add_argument("--seed", type=int, default=0, help="document split seed")


def run(args) -> EvalReport:
    res = evaluate(args.summac, seed=args.seed)
    rows = list(res["per_subset"])
    subsets = [r for r in rows if r["subset"] != "all"]
    rows.append({"subset": "macro (mean of subsets)", "n": sum(r["n"] for r in subsets),
                 "n_consistent": sum(r["n_consistent"] for r in subsets),
                 "balanced_acc_ours": sum(r["balanced_acc_ours"] for r in subsets) / len(subsets),
                 "balanced_acc_length_only": sum(r["balanced_acc_length_only"] for r in subsets) / len(subsets)})
    model = res["model"]
    weights = [{"feature": n, "weight": float(w)} for n, w in sorted(zip(model.names, model.coef), key=lambda x: -abs(x[1]))]
    report = EvalReport(name=NAME, tables={"held-out balanced accuracy": rows, "feature weights (standardised)": weights},
                        notes=[f"train {res['n_train']} / held-out {res['n_heldout']} pairs, split by document, "
                               f"seed {args.seed}; threshold {model.threshold:.3f} calibrated on the train split"])
    pooled = rows[0]
    macro = rows[-1]
    report.targets["pooled: ours > length-only"] = pooled["balanced_acc_ours"] > pooled["balanced_acc_length_only"]
    report.targets["macro: ours > length-only"] = macro["balanced_acc_ours"] > macro["balanced_acc_length_only"]
    return report
