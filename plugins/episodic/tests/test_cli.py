"""`thoth recall` and `thoth episodes list|export|import|reindex` through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from thoth_episodic import plugin
from thoth_episodic.memory import memory_for
from thoth_episodic.records import Episode

from thoth_core.cli import cli
from thoth_core.testing import make_test_runtime

DAY = 86400.0


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("THOTH_HOME", str(home))
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "episodic")
    monkeypatch.chdir(tmp_path)
    return home


def seed(home: Path, episodes: list[Episode]) -> None:
    runtime = make_test_runtime(home, {"episodic": plugin})
    memory_for(runtime).write_many(episodes)
    memory_for(runtime).close()


def thoth(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output + result.stderr
    return result.stdout, result.stderr


def ep(text: str, days_ago: float, peer: str = "ann", **extra) -> Episode:
    at = time.time() - days_ago * DAY
    return Episode(workspace="default", peer=peer, thread="t", user=text, occurred_at=at, recorded_at=at, **extra)


def test_episodes_search_prints_hits_with_scores_and_json(home):
    seed(
        home,
        [
            ep("We planted tomatoes in the garden", 3),
            ep("The printer is broken", 1),
            ep("tomatoes for bob", 1, peer="bob"),
        ],
    )
    out, _ = thoth("episodes", "search", "garden tomatoes", "--peer", "ann", "--k", "1")
    day = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 3 * DAY))
    dense = out.split("dense ")[1][:4]
    assert out == f'1. {day} ann/t  "We planted tomatoes in the garden"  dense {dense} · bm25 #1\n'
    hits = json.loads(thoth("episodes", "search", "garden tomatoes", "--peer", "ann", "--json")[0])
    assert [h["user"] for h in hits][0] == "We planted tomatoes in the garden" and len(hits) == 2
    assert set(hits[0]["why"]) == {"score", "dense", "dense_rank", "bm25", "bm25_rank", "recency", "age_days"}


def test_list_as_of_a_past_moment(home):
    seed(home, [ep("long ago", 10), ep("yesterday", 1)])
    out, _ = thoth("episodes", "list", "--peer", "ann")
    assert "long ago" in out and "yesterday" in out
    past = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - 5 * DAY))
    lines = thoth("episodes", "list", "--peer", "ann", "--as-of", past, "--json")[0].splitlines()
    assert [json.loads(line)["user"] for line in lines] == ["long ago"]


def test_export_import_round_trip(home, tmp_path, monkeypatch):
    originals = [
        ep(f"episode {i}", 10 - i, assistant=f"reply {i}", summary=f"s{i}", cost_usd=0.01 * i, turn_id=f"turn{i}")
        for i in range(5)
    ]
    seed(home, originals)
    target = tmp_path / "episodes.jsonl"
    _, err = thoth("episodes", "export", "-o", str(target))
    assert "exporting" in err
    exported = [json.loads(line) for line in target.read_text().splitlines()]
    assert [e["id"] for e in exported] == [e.id for e in originals]

    other = tmp_path / "other-home"
    other.mkdir()
    monkeypatch.setenv("THOTH_HOME", str(other))
    out, err = thoth("episodes", "import", str(target))
    assert "imported 5 episodes (0 already present)" in out and "importing" in err
    assert "indexing" not in err  # far below `ann_min_rows`: exact search
    assert thoth("episodes", "import", str(target))[0].startswith("imported 0 episodes (5 already present)")
    runtime = make_test_runtime(other, {"episodic": plugin})
    store = memory_for(runtime).store
    assert [e.to_dict() for e in store.episodes()] == [e.to_dict() for e in originals]
    assert memory_for(runtime).recall("episode 3", workspace="default", peer="ann", k=1)[0].dense is not None
    store.close()


def test_an_import_past_ann_min_rows_builds_the_ann_index_before_it_returns(home, tmp_path, monkeypatch):
    seed(home, [ep(f"episode {i}", 10 - i, turn_id=f"turn{i}") for i in range(5)])
    target = tmp_path / "episodes.jsonl"
    thoth("episodes", "export", "-o", str(target))
    other = tmp_path / "other-home"
    other.mkdir()
    (other / "thoth.toml").write_text("[plugins.episodic]\nann_min_rows = 3\n")
    monkeypatch.setenv("THOTH_HOME", str(other))
    monkeypatch.setenv("THOTH_CONFIG", str(other / "thoth.toml"))
    out, err = thoth("episodes", "import", str(target))
    assert "built the ANN index" in out and "indexing" in err
    assert (other / "episodic" / "episodes.db.usearch-scopes.json").exists()  # its peers are too small for a file
    out, err = thoth("episodes", "import", str(target))  # nothing new: nothing to build
    assert "imported 0 episodes" in out and "indexing" not in err


def test_import_names_the_bad_line(home, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"workspace": "w", "peer": "p", "thread": "t", "user": "ok"}\n{"nope": 1}\n')
    result = CliRunner().invoke(cli, ["episodes", "import", str(bad)])
    assert result.exit_code == 2 and f"{bad}:2: not an episode" in result.stderr


def test_reindex_re_embeds_every_episode(home):
    seed(home, [ep("alpha", 1), ep("beta", 2)])
    runtime = make_test_runtime(home, {"episodic": plugin})
    store = memory_for(runtime).store
    ids = [e.id for e in store.episodes()]
    import numpy as np

    store.set_vectors(ids, np.zeros((2, 384), dtype=np.float32))
    out, err = thoth("episodes", "reindex")
    assert "re-embedded 2 episodes with minilm" in out and "re-embedding" in err
    assert memory_for(runtime).recall("alpha", workspace="default", peer="ann", k=1)[0].dense > 0.9
    store.close()


def test_help_does_not_load_the_model_libraries(home):
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom thoth_core.cli import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\nassert 'episodes' in r.output and 'recall' in r.output, r.output\n"
        "print(sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers', 'psycopg') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
