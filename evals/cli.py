"""`cidermill eval data NAME ...`: evaluations of data stages; tables printed and saved.

Each evaluation is a module in `evals/data/` exposing
    NAME: str                          # `extraction`, `dedup`, `decontam`, `pii`, `license`, ...
    HELP: str
    add_arguments(parser) -> None
    run(args) -> EvalReport
and is found automatically. Model evaluations go under `cidermill eval model` the same way (`evals/model/`).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

from .report import EvalReport, save_report

KINDS = {"data": "evals.data", "model": "evals.model"}


def _modules(package: str):
    try:
        pkg = importlib.import_module(package)
    except ModuleNotFoundError:
        return []
    mods = [importlib.import_module(f"{package}.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)
            if not m.name.startswith("_")]
    return [m for m in mods if hasattr(m, "NAME")]  # helpers beside the evals (math_labelled) are not evals


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluations of data and models")
    ksub = p.add_subparsers(dest="eval_kind", required=True)
    for kind, package in KINDS.items():
        kp = ksub.add_parser(kind, help=f"{kind} evaluations")
        esub = kp.add_subparsers(dest="eval_name", required=True)
        for module in _modules(package):
            ep = esub.add_parser(module.NAME, help=module.HELP)
            ep.add_argument("--out", default="data/evals", help="folder for the saved tables (json + md)")
            module.add_arguments(ep)
            ep.set_defaults(func=_runner(module))


def _runner(module):
    def run(args) -> int:
        report: EvalReport = module.run(args)
        print(report.to_text())
        paths = save_report(report, args.out)
        print(f"saved {', '.join(paths)}")
        return 0 if report.passed is not False else 1

    return run
