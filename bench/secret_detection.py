"""Secret detection on the chat corpus: Thoth's rules against detect-secrets, and their union.

Prints JSON: for the secret sentences of `thoth_core.testing.secret_corpus` (each with one fake
secret or personal datum of its own kind, obfuscated variants included), how many Thoth redacts
whole (every value gone, every `[privacy] pii` kind on), how many detect-secrets flags (its
default plugins and filters, each sentence scanned as a file, as `detect-secrets scan` would),
their union, the false positives of each on the near-miss sentences (any change at all), the
kinds each misses, the recall of each group of the corpus (vendor tokens, issue 36's obfuscated
secrets, its personal data), redact()'s median time per corpus message (µs) and on 10 KB of text
(ms), and its CPU seconds on a megabyte of prose with near-misses: secrets only, the default
policy and every PII kind, for this tree and for a committed revision (`--baseline`, default
HEAD: its `thoth_core` from `git archive`, timed in a child process on the same text).
detect-secrets is optional: `.venv/bin/pip install detect-secrets` (not a runtime dependency).
Run: .venv/bin/python bench/secret_detection.py [--seed N] [--baseline REV | --baseline ""]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from thoth_core.redact import PII_KINDS, redact
from thoth_core.testing.secret_corpus import SecretCase, near_miss_corpus, secret_corpus

PII = tuple(PII_KINDS)


def thoth_finds(case: SecretCase) -> bool:
    """Every value of the case is gone from the redacted text (every PII kind on)."""
    kept = redact(case.text, PII)
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


def message_speed(messages: list[str], rounds: int = 200) -> dict[str, float]:
    """Median microseconds of redact() per chat message (the corpus sentences), with and without PII."""
    timings = {}
    for label, pii in (("secrets_us", ()), ("secrets_and_pii_us", PII)):
        for text in messages:  # warm: compiled rules, imported validators
            redact(text, pii)
        samples = []
        for _ in range(rounds):
            for text in messages:
                started = time.perf_counter()
                redact(text, pii)
                samples.append((time.perf_counter() - started) * 1e6)
        timings[label] = round(statistics.median(samples), 1)
    return timings


WORDS = (
    "the a deploy token budget password reset email key api rotation policy secret bread patience meet thursday "
    "commit ask task version config file user notes session agent memory phone number call order invoice"
).split()

# Timed in this process and in the baseline's: the CPU seconds of redact() on a text, best of three, per policy.
TIMER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import thoth_core.redact as r
assert r.__file__.startswith(sys.argv[1]), r.__file__
text = open(sys.argv[2], encoding="utf-8").read()
kinds = tuple(getattr(r, "PII_KINDS", ()))
r.redact(text[:2000]); r.redact(text[:2000], kinds)
def best(run):
    times = []
    for _ in range(3):
        started = time.process_time(); run(); times.append(time.process_time() - started)
    return round(min(times), 3)
print(json.dumps({"secrets_s": best(lambda: r.redact(text, ())), "default_s": best(lambda: r.redact(text)),
                  "every_pii_kind_s": best(lambda: r.redact(text, kinds)), "pii_kinds": len(kinds)}))
"""


def prose(size: int, seed: int) -> str:
    """`size` characters of chat prose: ordinary sentences and, 40% of the time, a near-miss sentence."""
    rng, near = random.Random(seed), [c.text for c in near_miss_corpus(seed)]
    parts, n = [], 0
    while n < size:
        part = rng.choice(near) if rng.random() < 0.4 else " ".join(rng.choices(WORDS, k=12)).capitalize() + "."
        parts.append(part)
        n += len(part) + 1
    return " ".join(parts)[:size]


def megabyte_speed(seed: int, baseline: str) -> dict[str, object]:
    """CPU seconds of redact() on a megabyte of prose here and, with `baseline`, at that committed revision."""
    folder = Path(tempfile.mkdtemp(prefix="thoth-bench-"))
    text_path = folder / "prose.txt"
    text_path.write_text(prose(1_000_000, seed), encoding="utf-8")
    root = Path(__file__).resolve().parent.parent
    timed: dict[str, object] = {}
    trees = {"this_tree": root}
    if baseline:
        archive = folder / "baseline.tar"
        subprocess.run(["git", "-C", str(root), "archive", "-o", str(archive), baseline, "thoth_core"], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(folder / "baseline", filter="data")
        trees[f"baseline_{baseline}"] = folder / "baseline"
    for label, tree in trees.items():
        out = subprocess.run(
            [sys.executable, "-c", TIMER, str(tree), str(text_path)], capture_output=True, text=True, check=True
        )
        timed[label] = json.loads(out.stdout)
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--baseline", default="HEAD", help='a git revision to time too ("" for none)')
    args = parser.parse_args()
    seed = args.seed
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
            "recall_by_group": {
                group: f"{sum(c.kind in thoth for c in cases if c.group == group)}/"
                f"{sum(c.group == group for c in cases)}"
                for group in sorted({c.group for c in cases})
            },
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
    result["redact_per_message"] = message_speed([c.text for c in cases + near])
    result["redact_10kb"] = redact_speed()
    result["redact_1mb_cpu"] = megabyte_speed(seed, args.baseline)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
