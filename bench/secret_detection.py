"""Secret detection on the chat corpus: Thoth's rules against detect-secrets, and their union.

Prints JSON: for the secret sentences of `thoth_core.testing.secret_corpus` (each with one fake
secret of its own kind), how many Thoth redacts whole (every value gone, `[privacy] pii` on for
the card and SSN sentences), how many detect-secrets flags (its default plugins and filters, each
sentence scanned as a file, as `detect-secrets scan` would), their union, the false positives of
each on the near-miss sentences, the kinds each misses, and redact()'s median time on 10 KB of text.
detect-secrets is optional: `.venv/bin/pip install detect-secrets` (not a runtime dependency).
Run: .venv/bin/python bench/secret_detection.py [--seed N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from thoth_core.redact import redact
from thoth_core.testing.secret_corpus import SecretCase, near_miss_corpus, secret_corpus

PII = ("card", "ssn")


def thoth_finds(case: SecretCase) -> bool:
    """Every value of the case is gone from the redacted text (the policy opts into the case's PII kind)."""
    kept = redact(case.text, PII if case.pii else ())
    return not any(value in kept for value in case.values)


def thoth_alters(case: SecretCase) -> bool:
    """A near-miss is changed by redaction with every PII kind on."""
    return redact(case.text, PII) != case.text


def detect_secrets_scanner() -> Callable[[str], int] | None:
    """A function text -> number of findings by detect-secrets' default plugins, or None when not installed."""
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    folder = Path(tempfile.mkdtemp(prefix="thoth-bench-"))

    def findings(text: str) -> int:
        path = folder / "sentence.txt"
        path.write_text(text + "\n", encoding="utf-8")
        collection = SecretsCollection()
        with default_settings():
            collection.scan_file(str(path))
        return sum(len(found) for _, found in collection.data.items())

    return findings


def redact_speed(size: int = 10_000, rounds: int = 30) -> dict[str, float]:
    """Median milliseconds of redact() on `size` characters of prose with near-misses, with and without PII."""
    sentences = [c.text for c in near_miss_corpus()] + ["We met on Thursday and the deploy went fine."] * 10
    text = " ".join(sentences * (size // sum(len(s) + 1 for s in sentences) + 1))[:size]
    timings = {}
    for label, pii in (("secrets_ms", ()), ("secrets_and_pii_ms", PII)):
        samples = []
        for _ in range(rounds):
            started = time.perf_counter()
            redact(text, pii)
            samples.append((time.perf_counter() - started) * 1000)
        timings[label] = round(statistics.median(samples), 3)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=19)
    seed = parser.parse_args().seed
    cases, near = secret_corpus(seed), near_miss_corpus(seed)
    thoth = {c.kind for c in cases if thoth_finds(c)}
    result: dict[str, object] = {
        "seed": seed,
        "secret_sentences": len(cases),
        "near_misses": len(near),
        "thoth": {
            "found": len(thoth),
            "missed": sorted(c.kind for c in cases if c.kind not in thoth),
            "false_positives": sorted(c.kind for c in near if thoth_alters(c)),
        },
    }
    scan = detect_secrets_scanner()
    if scan is None:
        result["detect_secrets"] = "not installed (.venv/bin/pip install detect-secrets)"
    else:
        flagged = {c.kind for c in cases if scan(c.text)}
        result["detect_secrets"] = {
            "found": len(flagged),
            "missed": sorted(c.kind for c in cases if c.kind not in flagged),
            "false_positives": sorted(c.kind for c in near if scan(c.text)),
        }
        union = thoth | flagged
        result["union"] = {"found": len(union), "missed": sorted(c.kind for c in cases if c.kind not in union)}
        result["found_by_detect_secrets_only"] = sorted(flagged - thoth)
    result["redact_10kb"] = redact_speed()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
