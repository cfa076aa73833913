"""Episodic ingest rate with embeddings against the embedding model alone, same texts, same run; prints JSON.

    python bench/episodic_ingest.py [--n 768] [--repeats 5] [--sweep] [--json]

Synthetic conversations of LoCoMo-like turn lengths (a user turn of about 18 words, a reply of
about 35, lognormal; whole words of the MiniLM vocabulary, in sentences), 20 turns a thread.
Measured in one process, interleaved, with medians over repeats, in episodes per second:

- `model_alone`: `embedder.embed` on exactly the texts the write path embeds (`embed_text` of
  each episode), in the chunks the write path hands it (`write_many`'s batch);
- `import`: `EpisodicMemory.write_many` (what `thoth episodes import` and `thoth bundle import`
  call): embedding text, embedding, insert with FTS, SQLite commit per batch;
- `post_turn`: a burst of finished turns through the post-turn path (runtime redaction,
  summary, `EpisodicMemory.write`: latest-of-thread, insert with FTS, neighbour context, the
  background embedding queue) until every vector is stored.

`*_beyond_model_ms_per_episode`: the same write paths with a constant embedder, i.e. what
they cost on top of the model. Ratios are write-path episodes/s over model-alone episodes/s
(1.0: the write path costs nothing beyond the model), on wall time and, less sensitive to
other processes on the machine, on this process's CPU time; `*_ratio_serial_bound` is the
ratio the extra cost would give if none of it overlapped the model (a lower bound, steadier
than timing both on a busy machine). `batch_sweep` times the model alone at several call and
internal batch sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TURNS_PER_THREAD = 20


def _vocabulary() -> list[str]:
    """Whole lower-case English words of the MiniLM WordPiece vocabulary."""
    from thoth_episodic.embedder import model_files

    vocab = json.loads(model_files()[1].read_text())["model"]["vocab"]
    return [w for w in vocab if w.isalpha() and w.islower() and len(w) >= 2]


def _sentence_text(rng: np.random.Generator, words: list[str], count: int) -> str:
    picked = list(rng.choice(words, count))
    out, since = [], 0
    for word in picked:
        out.append(word)
        since += 1
        if since >= 6 and rng.random() < 0.12:
            out[-1] += "."
            since = 0
    text = " ".join(out)
    return text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def conversations(n: int, seed: int = 11) -> list[tuple[str, str, str]]:
    """n (thread, user, reply) turns, reproducible from the seed."""
    rng = np.random.default_rng(seed)
    words = _vocabulary()
    out = []
    for i in range(n):
        user_words = int(np.clip(rng.lognormal(np.log(18), 0.6), 3, 120))
        reply_words = int(np.clip(rng.lognormal(np.log(35), 0.6), 3, 200))
        thread = f"t{i // TURNS_PER_THREAD}"
        out.append((thread, _sentence_text(rng, words, user_words), _sentence_text(rng, words, reply_words)))
    return out


def import_episodes(turns: list[tuple[str, str, str]], workspace: str) -> list[Any]:
    """Episodes as an export holds them: summary, neighbour context, fresh ids."""
    from thoth_episodic.memory import _clip, summarize
    from thoth_episodic.records import Episode

    episodes, previous = [], {}
    now = time.time() - len(turns)
    for i, (thread, user, reply) in enumerate(turns):
        before = previous.get(thread)
        episodes.append(
            Episode(
                workspace=workspace,
                peer="p",
                thread=thread,
                user=user,
                assistant=reply,
                summary=summarize(user, reply),
                context=_clip(before[0] + " " + before[1]) if before else "",
                occurred_at=now + i,
            )
        )
        previous[thread] = (user, reply)
    return episodes


def rate(count: int, seconds: float) -> float:
    """Episodes per second."""
    return count / seconds if seconds > 0 else float("inf")


def clocks() -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds over all its threads)."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    """Wall and CPU seconds since `start`."""
    wall, cpu = clocks()
    return wall - start[0], cpu - start[1]


def time_model(embedder: Any, texts: list[str], chunk: int) -> tuple[float, float]:
    """Wall and CPU seconds for the embedder alone on texts, `chunk` at a time."""
    started = clocks()
    for start in range(0, len(texts), chunk):
        embedder.embed(texts[start : start + chunk])
    return since(started)


def time_import(memory: Any, episodes: list[Any]) -> tuple[float, float]:
    """Wall and CPU seconds for `write_many` (import, bundle import) on the episodes."""
    started = clocks()
    stored = memory.write_many(episodes)
    seconds = since(started)
    assert stored == len(episodes), (stored, len(episodes))
    return seconds


def time_post_turn(runtime: Any, memory: Any, turns: list[tuple[str, str, str]], workspace: str) -> tuple[float, float]:
    """Wall and CPU seconds for a burst of post-turn writes (redaction, summary, write) until every vector is stored."""
    from thoth_episodic.memory import summarize
    from thoth_episodic.records import Episode

    redact = runtime.redactor.redact
    started = clocks()
    for thread, user, reply in turns:
        user, reply = redact(user), redact(reply)
        memory.write(
            Episode(
                workspace=workspace,
                peer="p",
                thread=thread,
                user=user,
                assistant=reply,
                summary=summarize(user, reply),
            )
        )
    assert memory.flush(timeout=600)
    return since(started)


class ConstantEmbedder:
    """The same unit vector for every text: what the write path costs beyond the model."""

    name = "constant"
    dim = 384

    def embed(self, texts: list[str]) -> np.ndarray:
        """One constant row per text."""
        return np.full((len(texts), self.dim), self.dim**-0.5, dtype=np.float32)


def without_model(runtime: Any, memory: Any, turns: list[tuple[str, str, str]], repeats: int) -> dict[str, float]:
    """Wall milliseconds per episode each write path spends beyond the model (a constant embedder)."""
    model, memory._embedder = memory._embedder, ConstantEmbedder()
    try:
        imported = [time_import(memory, import_episodes(turns, f"plain{r}"))[0] for r in range(repeats)]
        post_turn = [time_post_turn(runtime, memory, turns, f"plain-turns{r}")[0] for r in range(repeats)]
    finally:
        memory._embedder = model
    return {
        "import_beyond_model_ms_per_episode": round(1000 * statistics.median(imported) / len(turns), 3),
        "post_turn_beyond_model_ms_per_episode": round(1000 * statistics.median(post_turn) / len(turns), 3),
    }


def batch_sweep(texts: list[str], threads: int) -> list[dict[str, Any]]:
    """The model alone at several (call chunk, internal batch_size, batch_tokens)."""
    from thoth_episodic.embedder import MiniLMEmbedder

    out = []
    for chunk, size, tokens in [
        (1, 1, 512),
        (256, 32, 512),
        (256, 16, 2048),
        (256, 64, 8192),
    ]:
        embedder = MiniLMEmbedder(batch_size=size, batch_tokens=tokens, threads=threads)
        embedder.embed(texts[:8])
        seconds = [time_model(embedder, texts, chunk) for _ in range(3)]
        wall, cpu = (min(s[i] for s in seconds) for i in (0, 1))
        out.append(
            {
                "chunk": chunk,
                "batch_size": size,
                "batch_tokens": tokens,
                "eps": round(rate(len(texts), wall), 1),
                "cpu_ms_per_episode": round(1000 * cpu / len(texts), 2),
            }
        )
    return out


def run(n: int, repeats: int, sweep: bool) -> dict[str, Any]:
    """Every measurement, interleaved, in this process."""
    from thoth_episodic import plugin
    from thoth_episodic.memory import memory_for
    from thoth_episodic.scoring import embed_text

    from thoth_core.testing import make_test_runtime

    turns = conversations(n)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as folder:
        runtime = make_test_runtime(Path(folder), {"episodic": plugin})
        memory = memory_for(runtime)
        memory.embed(["warm up"])
        embedder = memory.embedder
        chunk = memory.import_batch if hasattr(memory, "import_batch") else 256
        texts = [embed_text(e) for e in import_episodes(turns, "texts")]
        measured: dict[str, list[tuple[float, float]]] = {"model_alone": [], "import": [], "post_turn": []}
        time_import(memory, import_episodes(turns[:64], "warm"))
        for r in range(repeats):
            measured["model_alone"].append(time_model(embedder, texts, chunk))
            measured["import"].append(time_import(memory, import_episodes(turns, f"import{r}")))
            measured["post_turn"].append(time_post_turn(runtime, memory, turns, f"turns{r}"))
        tokens = [len(e.ids) for e in embedder._tokenizer.encode_batch(texts)]
        wall = {name: statistics.median(s[0] for s in runs) for name, runs in measured.items()}
        cpu = {name: statistics.median(s[1] for s in runs) for name, runs in measured.items()}
        result: dict[str, Any] = {
            "episodes": n,
            "repeats": repeats,
            "chunk": chunk,
            "embedder": {k: getattr(embedder, k) for k in ("batch_size", "batch_tokens", "max_tokens", "threads")},
            "text_tokens_median": statistics.median(tokens),
        }
        for name in measured:
            result[f"{name}_eps"] = round(rate(n, wall[name]), 1)
            result[f"{name}_cpu_ms_per_episode"] = round(1000 * cpu[name] / n, 2)
        for name in ("import", "post_turn"):
            result[f"{name}_ratio"] = round(wall["model_alone"] / wall[name], 3)
            result[f"{name}_cpu_ratio"] = round(cpu["model_alone"] / cpu[name], 3)
        result |= without_model(runtime, memory, turns, repeats)
        model_ms = 1000 * wall["model_alone"] / n
        for name in ("import", "post_turn"):  # the ratio if none of that work overlapped the model's
            extra = result[f"{name}_beyond_model_ms_per_episode"]
            result[f"{name}_ratio_serial_bound"] = round(model_ms / (model_ms + extra), 3)
        if sweep:
            result["batch_sweep"] = batch_sweep(texts, embedder.threads)
        memory.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=768, help="episodes per measurement")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (medians)")
    parser.add_argument("--sweep", action="store_true", help="also time the model at several batch sizes")
    parser.add_argument("--json", action="store_true", help="compact JSON")
    args = parser.parse_args()
    out = {"benchmark": "episodic_ingest", "cpus": os.cpu_count(), "load_average": os.getloadavg()}
    out |= run(args.n, args.repeats, args.sweep)
    json.dump(out, sys.stdout, indent=None if args.json else 2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
