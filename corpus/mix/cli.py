"""`cidermill mix ...`: train tokenizers, tokenize dataset versions, build/show mixtures, run ablations."""

from __future__ import annotations

import argparse
import json
import os

DEFAULT_ROOT = os.environ.get("CIDERMILL_ROOT", "data/root")
UNIGRAM_PROXY_COMMAND = "{python} -m corpus.mix.unigram_proxy --mixture {mixture} --out {out}"
DEFAULT_ABLATE_COMMAND = UNIGRAM_PROXY_COMMAND  # kept for callers that imported it
# a real proxy: a tiny megatron model trained on each variant for a fixed token budget (training/mix_proxy.py)
TRAIN_PROXY_COMMAND = ("{python} -m training.mix_proxy --mixture {mixture} --root {root} --out {out} --seed {seed} "
                       "--tokens {tokens}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mix", help="tokenizers, tokenized datasets, mixtures, ablations")
    p.add_argument("--root", default=DEFAULT_ROOT, help="data root (path or URI; env CIDERMILL_ROOT)")
    msub = p.add_subparsers(dest="mix_cmd", required=True)

    t = msub.add_parser("train-tokenizer", help="train SentencePiece BPE on a sample of dataset versions")
    t.add_argument("versions", nargs="+", help="catalog refs to sample from")
    t.add_argument("--name", help="artifact name (default bpe-<vocab size>)")
    t.add_argument("--vocab-size", type=int, default=49152, help="49152 on-device, 100352 server, small for tests")
    t.add_argument("--text-field", default="text")
    t.add_argument("--sample-docs", type=int, default=500_000, help="at most this many documents per version")
    t.add_argument("--sample-bytes", default="1GB", help="at most this much text in total")
    t.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    t.add_argument("--seed", type=int, default=0)
    t.set_defaults(func=cmd_train_tokenizer)

    k = msub.add_parser("tokenize", help="tokenize a dataset version into Megatron .bin/.idx")
    k.add_argument("version", help="catalog ref")
    k.add_argument("--tokenizer", required=True, help="tokenizer artifact ref, or a .model / tokenizer.json path")
    k.add_argument("--eod-token", help="end-of-document token for a tokenizer.json without a usual one")
    k.add_argument("--text-field", default="text")
    k.add_argument("--workers", type=int, default=0, help="processes (0: one per core)")
    k.add_argument("--rows-per-task", type=int, default=0)
    k.add_argument("--executor", choices=["local", "ray"], default="local", help="run the tasks on the local pool or Ray")
    k.add_argument("--address", help="ray cluster address (implies --executor ray)")
    k.add_argument("--force", action="store_true", help="tokenize again even if a tokenization is published")
    k.set_defaults(func=cmd_tokenize)

    b = msub.add_parser("build", help="validate a mixture YAML, tokenize what is missing, write the mixture manifest")
    b.add_argument("mixture", help="mixture YAML (see configs/mixtures/)")
    b.add_argument("--workers", type=int, default=0)
    b.add_argument("--eod-token")
    b.add_argument("--check", action="store_true", help="validate only: no tokenizing, nothing written")
    b.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a mixture key, validated like the YAML (--set token_budget=2M "
                        "--set components.0.weight=0.3)")
    b.set_defaults(func=cmd_build)

    s = msub.add_parser("show", help="print a mixture manifest (catalog ref or mixture.json path)")
    s.add_argument("mixture")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_show)

    a = msub.add_parser("ablate", help="w_i +/- delta variants of a mixture, a proxy run each, table + plot")
    a.add_argument("mixture", help="a built mixture (ref or mixture.json) or a mixture YAML (built first)")
    a.add_argument("--delta", type=float, default=0.5, help="relative change w_i*(1 +/- delta) (default 0.5)")
    a.add_argument("--absolute", action="store_true", help="delta is absolute: w_i +/- delta")
    a.add_argument("--components", help="comma-separated components to vary (default: all)")
    a.add_argument("--proxy", choices=("train", "unigram"), default="train",
                   help="train: a tiny megatron model per variant and seed (default); unigram: the "
                        "seconds-cheap unigram proxy (no training)")
    a.add_argument("--proxy-tokens", type=int, default=64 * 1024, help="training tokens per proxy run (train)")
    a.add_argument("--seeds", default="1,2", help="comma-separated seeds, every variant trained with each "
                                                  "(train proxy; >= 2 for error bars)")
    a.add_argument("--workers", type=int, default=2, help="runs at a time (local executor)")
    a.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: a pool of processes; ray: one Ray task per run")
    a.add_argument("--command",
                   help="custom proxy run per variant and seed; placeholders {mixture} {mixture_ref} {out} {root} "
                        "{name} {seed} {python}; it must write {out}/scores.json (overrides --proxy)")
    a.add_argument("--out", help="output directory (default <root>/.ablations/<mixture name>/<settings id>)")
    a.add_argument("--lower-is-better", default="", help="comma-separated metrics where lower is better "
                                                         "(nll/*, loss* and perplexity* are by default)")
    a.add_argument("--timeout", type=float, help="seconds per run")
    a.set_defaults(func=cmd_ablate)


def _catalog(args):
    from manifests import Catalog

    return Catalog(args.root)


def cmd_train_tokenizer(args) -> int:
    from corpus.mix.tokenizer import TokenizerTrainConfig, train_tokenizer
    from manifests.config import build_config

    config = build_config(TokenizerTrainConfig, {
        "vocab_size": args.vocab_size, "text_field": args.text_field, "sample_docs": args.sample_docs,
        "sample_bytes": args.sample_bytes, "num_threads": args.threads, "seed": args.seed,
    }, where="mix train-tokenizer")
    v = train_tokenizer(_catalog(args), args.versions, config, name=args.name)
    info = v.manifest.extra["tokenizer"]
    print(f"tokenizer {v.name}@{v.version_id[:12]}: {info['vocab_size']:,} pieces, eod {info['eod_id']}, "
          f"trained on {info['sample']['documents']:,} docs ({info['sample']['bytes'] / 1e6:.1f} MB) "
          f"in {info['sample']['seconds']:.1f} s")
    print(f"model     {v.directory.join(info['model_file']).uri}  sha256 {info['model_sha256'][:16]}")
    return 0


def cmd_tokenize(args) -> int:
    from corpus.mix import TokenizeConfig, tokenize_version
    from corpus.mix.tokenizer import load_tokenizer

    cat = _catalog(args)
    tok = load_tokenizer(args.tokenizer, catalog=cat, eod_token=args.eod_token)
    config = TokenizeConfig(text_field=args.text_field, workers=args.workers, rows_per_task=args.rows_per_task,
                            executor="ray" if args.address else args.executor, address=args.address)
    v = tokenize_version(cat, args.version, tok, config, reuse=not args.force)
    e = v.manifest.extra
    print(f"tokenized {e['source']['name']}@{e['source']['version_id'][:12]} -> {v.name}@{v.version_id[:12]}")
    print(f"  {e['documents']:,} documents, {e['tokens']:,} tokens ({e['dtype']}), prefix "
          f"{v.directory.join(e['prefix']).uri}")
    for st in v.manifest.stats:
        if st.dropped:
            print(f"  skipped: {st.dropped}")
        print(f"  {st.seconds:.1f} s")
    return 0


def cmd_build(args) -> int:
    from corpus.mix import TokenizeConfig
    from corpus.mix.mixture_build import _check_component, build_mixture, describe_mixture, load_mixture_spec
    from corpus.mix.tokenizer import load_tokenizer

    spec = load_mixture_spec(args.mixture, args.set)
    cat = _catalog(args)
    if args.check:
        tok = load_tokenizer(spec.tokenizer, catalog=cat, eod_token=args.eod_token)
        for i in range(len(spec.components)):
            _check_component(cat, spec, i, tok)
        print(f"{args.mixture}: ok ({len(spec.components)} components, tokenizer {tok.name})")
        return 0
    m = build_mixture(cat, spec, tokenize=TokenizeConfig(workers=args.workers), eod_token=args.eod_token,
                      publish=False)
    location = m.publish(cat)  # <root>/<name>/<id>/mixture.json
    print(describe_mixture(m))
    print(f"mixture manifest: {m.name}@{location.path.rsplit('/', 2)[-2][:12]}  {location.uri}")
    return 0


def _open_mixture(cat, ref: str):
    from manifests.mixture import MixtureManifest

    if os.path.isfile(ref):
        return MixtureManifest.read(ref, root=cat.root)
    return MixtureManifest.open(cat, ref)


def cmd_show(args) -> int:
    from corpus.mix.mixture_build import describe_mixture

    m = _open_mixture(_catalog(args), args.mixture)
    if args.json:
        print(m.to_json(), end="")
    else:
        print(describe_mixture(m))
        print("  megatron --data-path " + " ".join(m.data_path_args()))
    return 0


def cmd_ablate(args) -> int:
    import hashlib

    from corpus.mix import ablate
    from corpus.mix.mixture_build import build_mixture, load_mixture_spec

    cat = _catalog(args)
    if args.mixture.endswith((".yaml", ".yml")):
        base = build_mixture(cat, load_mixture_spec(args.mixture))
    else:
        base = _open_mixture(cat, args.mixture)
    comps = [c.strip() for c in args.components.split(",")] if args.components else None
    variants = ablate.make_variants(base, args.delta, absolute=args.absolute, components=comps)
    if args.command:
        command, proxy = args.command, "custom"
    elif args.proxy == "unigram":
        command, proxy = UNIGRAM_PROXY_COMMAND, "unigram (no training)"
    else:
        command, proxy = TRAIN_PROXY_COMMAND.replace("{tokens}", str(args.proxy_tokens)), "train (tiny megatron)"
    seeds = tuple(int(x) for x in args.seeds.split(",") if x.strip()) if proxy != "unigram (no training)" \
        else (base.seed,)
    base_id = base.publish(cat).path.rsplit("/", 2)[-2]
    settings = {"base_mixture": f"{base.name}@{base_id}", "delta": args.delta, "absolute": args.absolute,
                "components": comps, "proxy": proxy, "command": command, "seeds": list(seeds)}
    settings_id = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    out = args.out or os.path.join(cat.root.uri, ".ablations", base.name, settings_id)
    results = ablate.run_ablation(cat, base, variants, command, out, timeout_s=args.timeout, seeds=seeds,
                                  workers=args.workers, executor=args.executor)
    metrics = list(results[0].scores)
    lower = {m for m in metrics if m.startswith(("nll", "loss", "perplexity", "ppl"))}
    lower |= {m.strip() for m in args.lower_is_better.split(",") if m.strip()}
    rows = ablate.ablation_rows(results, lower_is_better=tuple(sorted(lower)))
    csv_path, md_path = ablate.write_table(rows, out)
    png = ablate.plot(rows, os.path.join(out, "ablation.png"),
                      title=f"{base.name}: delta {args.delta}, {proxy} proxy, seeds {','.join(map(str, seeds))}")
    manifest = ablate.write_manifest(out, base=base, settings={**settings, "id": settings_id}, results=results,
                                     rows=rows, files=[os.path.basename(p) for p in (csv_path, md_path, png)])
    print(open(md_path, encoding="utf-8").read(), end="")
    print(f"{len(results)} runs ({sum(r.resumed for r in results)} resumed), {proxy} proxy; table {csv_path}; "
          f"plot {png}; manifest {manifest}")
    return 0


__all__ = ["add_parser"]
