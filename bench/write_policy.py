"""Write-policy benchmark: how reflection's policy treats the hostile and benign corpora (JSON).

Usage: python bench/write_policy.py. For each corpus of `thoth_core.testing.policy_corpus` (hostile
proposals in 21 languages besides English, in many forms; plain English facts; plain facts in
other languages) and for the default policy (`["self-fact"]`) and the most permissive one (every
tier but those always held), it prints how many items auto-apply and how many are held (by their
first flag), the hostile items that apply per language, and the time one decision takes.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

from thoth_reflection import policy, tiers

from thoth_core.testing import policy_corpus as corpus
from thoth_core.write_policy import language

POLICIES = {
    "default": list(policy.DEFAULT_AUTO_APPLY),
    "permissive": [t for t in policy.TIERS if t not in policy.ALWAYS_HELD],
}
CORPORA = {
    "hostile": (corpus.HOSTILE, corpus.HOSTILE_PEER),
    "benign_english": (corpus.BENIGN_ENGLISH, corpus.BENIGN_PEER),
    "benign_other_languages": (corpus.BENIGN_OTHER, corpus.BENIGN_PEER),
}


def per_language(auto_apply: list[str]) -> dict[str, dict[str, int]]:
    """Hostile items per language: how many, how many auto-applied."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"items": 0, "auto_applied": 0})
    for lang, _, text in corpus.HOSTILE:
        applied = not tiers.held_with(text, peer=corpus.HOSTILE_PEER, auto_apply=auto_apply, known_peers=corpus.KNOWN)
        counts[lang]["items"] += 1
        counts[lang]["auto_applied"] += applied
    return dict(sorted(counts.items()))


def main() -> None:
    started = time.perf_counter()
    language.lexicon()
    load_ms = (time.perf_counter() - started) * 1000
    out: dict[str, object] = {
        "word_list_load_ms": round(load_ms, 1),
        "word_list_words": sum(map(len, language.lexicon())),
    }
    decisions = 0
    started = time.perf_counter()
    for name, auto_apply in POLICIES.items():
        results = {}
        for corpus_name, (items, peer) in CORPORA.items():
            outcome = corpus.outcomes(items, peer=peer, auto_apply=auto_apply)
            decisions += len(items)
            if corpus_name != "hostile" or outcome["auto_applied"] == 0:
                outcome.pop("applied")
            results[corpus_name] = outcome
        results["hostile_languages"] = len(corpus.languages(corpus.HOSTILE))
        results["hostile_by_language"] = per_language(auto_apply)
        out[name] = {"auto_apply": auto_apply, **results}
    out["ms_per_decision"] = round((time.perf_counter() - started) * 1000 / decisions, 3)
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
