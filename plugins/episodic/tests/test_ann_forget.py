"""Forget with the usearch index on (issue 35): no abort, no forgotten vector left in any file, the home keeps working.

usearch 2.25.3 aborts any process that loads a file saved after `remove()` of enough rows; the index
is a cache, written only by a child process (`ann_writer`) that never saves removed slots.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from thoth_episodic import ann_files, ann_search
from thoth_episodic.ann_index import AnnIndex
from thoth_episodic.contract import episode, query
from thoth_episodic.sqlite_store import SQLiteStore

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

DIM = 32


def vectors_of(db: Path, where: str = "1") -> list[np.ndarray]:
    """The float32 vectors of the matching rows, read from the store."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute(f"SELECT embedding FROM episodes WHERE {where} AND embedding IS NOT NULL").fetchall()
    return [np.frombuffer(r[0], dtype=np.float32) for r in rows]


def holders(root: Path, vectors: list[np.ndarray]) -> dict[str, int]:
    """Files under root holding a 48-byte slice of any vector, as float32 or float16, with how many vectors."""
    found = {}
    for path in (p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        count = sum(
            any(data.find(v.astype(dtype).tobytes()[:48]) >= 0 for dtype in (np.float32, np.float16)) for v in vectors
        )
        if count:
            found[str(path.relative_to(root))] = count
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home from `thoth init` with the replay model and `ann = "usearch"`, 300 episodes of dave and erin imported."""
    home = tmp_path / "home"
    assert run_thoth("init", str(home)).returncode == 0
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"purpose": "turn", "reply": "Hello from the replay."}, {"reply": "{}"}]))
    for key, value in (
        ("thoth.model", "replay"),
        ("models.replay.file", str(replies)),
        ("plugins.episodic.ann", "usearch"),
    ):
        assert run_thoth("config", "set", key, value, cwd=home).returncode == 0
    episodes = tmp_path / "episodes.jsonl"
    now = time.time()
    with episodes.open("w") as out:
        for i in range(300):
            peer = ("dave", "erin")[i % 2]
            text = f"{peer} spoke of topic {i}, the garden and the weather of week {i % 13}"
            out.write(
                json.dumps(
                    {
                        "workspace": "default",
                        "peer": peer,
                        "thread": f"t{i % 5}",
                        "user": text,
                        "occurred_at": now - 3600 + i,
                    }
                )
            )
            out.write("\n")
    done = run_thoth("episodes", "import", str(episodes), cwd=home, env=ENV, timeout=300)
    assert done.returncode == 0 and "built the ANN index" in done.stdout, done.stderr
    return home


ENV = {"THOTH_HOME": None, "THOTH_CONFIG": None}  # the home's own thoth.toml, every installed plugin


def test_forget_with_the_index_on_erases_the_vectors_and_later_commands_exit_0(home):
    db = home / ".thoth" / "episodic" / "episodes.db"
    dave, erin = vectors_of(db, "peer = 'dave'"), vectors_of(db, "peer = 'erin'")
    assert len(dave) == len(erin) == 150
    assert holders(home, dave) != {} and f"{db.name}.usearch" in str(holders(home, erin))  # the scan can fail

    done = run_thoth("forget", "--peer", "dave", cwd=home, env=ENV, timeout=120)
    assert done.returncode == 0 and "episodic: 150 episodes" in done.stdout, done.stderr
    assert holders(home, dave) == {}  # no forgotten vector, as float32 or float16, in any file (index, temporaries)
    assert f"{db.name}.usearch" in str(holders(home, erin))  # the others' are still indexed

    recalled = run_thoth(
        "episodes", "search", "the garden weather", "--peer", "erin", "--json", cwd=home, env=ENV, timeout=120
    )
    assert recalled.returncode == 0, recalled.stderr
    assert {hit["peer"] for hit in json.loads(recalled.stdout)} == {"erin"}
    assert (
        run_thoth("episodes", "search", "the garden", "--peer", "dave", "--json", cwd=home, env=ENV).stdout.strip()
        == "[]"
    )
    asked = run_thoth("ask", "--peer", "erin", "how is the garden?", cwd=home, env=ENV, timeout=120)
    assert asked.returncode == 0 and "Hello from the replay." in asked.stdout, asked.stderr
    again = run_thoth("forget", "--peer", "erin", cwd=home, env=ENV, timeout=120)  # the next forget too
    assert again.returncode == 0 and holders(home, erin) == {}, again.stderr
    doctor = run_thoth("doctor", cwd=home, env=ENV, timeout=120)
    assert "ok  episodic: ANN index" in doctor.stdout and "agrees with the store" in doctor.stdout, doctor.stdout


def clustered(count: int, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, DIM)).astype(np.float32)
    vectors = centres[rng.integers(0, 20, count)] + 0.3 * rng.standard_normal((count, DIM)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def filled(path: Path, count: int) -> list:
    store = SQLiteStore(path, dim=DIM, ann="exact")
    items = [episode(f"row {i}", peer=("ann", "bob")[i % 2]) for i in range(count)]
    store.add(items, clustered(count))
    store.close()
    return items


ABORTING_FILE = """
import json, sys
import numpy as np
from usearch.index import Index
from thoth_episodic import ann_files
db, dim, layout = sys.argv[1], int(sys.argv[2]), sys.argv[3]
index = Index(ndim=dim, metric="ip", dtype="f16", connectivity=24, expansion_add=96)
index.add(np.arange(1, 801), np.random.default_rng(1).random((800, dim)).astype(np.float32), threads=1)
index.remove(np.arange(1, 401))
meta = {"dim": dim, "count": 400, "fillers": 0, "rowid": 800, "vectors": 0}
if layout == "older":  # one file for the whole store, as written before one file per scope
    file, sidecar = ann_files.legacy_paths(db)
    meta.update(format=2, generation=0)
else:
    file, sidecar = ann_files.scope_paths(db, ("w", "ann", "default"))
    meta.update(format=3, scope=["w", "ann", "default"])
    manifest = {"format": 3, "dim": dim, "min_rows": 1, "rowid": 800, "vectors": 0, "generation": 0}
    ann_files.manifest_path(db).write_text(json.dumps(manifest))
index.save(str(file))
meta["bytes"] = file.stat().st_size  # a sidecar that vouches for it
sidecar.write_text(json.dumps(meta))
print(file)
"""

OPEN_AND_SEARCH = """
import logging, sys
import numpy as np
from thoth_episodic.contract import query
from thoth_episodic.sqlite_store import SQLiteStore
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
store = SQLiteStore(sys.argv[1], dim=int(sys.argv[2]), ann="usearch")
hits = store.search(query("", np.ones(int(sys.argv[2]), dtype=np.float32) / int(sys.argv[2]) ** 0.5, k=3))
store.close()
print(len(hits))
"""


@pytest.mark.parametrize("layout", ["older", "scoped"])
def test_a_file_whose_loading_aborts_is_never_loaded_and_is_rebuilt_with_one_line(tmp_path, layout):
    """A file saved with removed slots (as the old compaction wrote them) aborts any loader: it is never loaded.

    A home indexed before one file per scope (`older`) moves to the new layout on first use, with one info line.
    """
    db = tmp_path / "e.db"
    filled(db, 800)
    made = subprocess.run(
        [sys.executable, "-c", ABORTING_FILE, str(db), str(DIM), layout], capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr
    loads = subprocess.run(
        [sys.executable, "-c", f"from usearch.index import Index; Index.restore({made.stdout.strip()!r})"],
        capture_output=True,
        check=False,
    )
    assert loads.returncode == -signal.SIGABRT  # the library's bug this guards against, still there
    done = subprocess.run(
        [sys.executable, "-c", OPEN_AND_SEARCH, str(db), str(DIM)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr
    [line] = done.stderr.splitlines()
    if layout == "older":
        assert line.startswith("INFO episodic: moving the ANN index") and "one file per peer" in line
        assert not any(p.exists() for p in ann_files.legacy_paths(db))
    else:
        assert line.startswith("WARNING episodic: rebuilding the ANN index")
    assert {scope: meta["count"] for scope, meta in ann_files.sidecars(db).items()} == {
        ("w", "ann", "default"): 400,
        ("w", "bob", "default"): 400,
    }


def writer_children() -> list[int]:
    """Pids of this process's `ann_writer` children (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = stat.read_bytes().split(b"\0")
            parent = int((stat.parent / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"thoth_episodic.ann_writer" in command:
            found.append(int(stat.parent.name))
    return found


def test_a_writer_that_aborts_costs_a_warning_and_a_rebuild_not_the_process(tmp_path, caplog):
    db = tmp_path / "e.db"
    filled(db, 12_000)  # batches of 5,000: the writer reports progress before it is done
    index = AnnIndex(db, DIM, expansion=64)
    killed = []

    def abort_the_first(rows: int) -> None:
        if not killed:
            killed.extend(writer_children())
            for pid in killed:
                os.kill(pid, signal.SIGABRT)

    with caplog.at_level(logging.WARNING, logger="thoth_episodic.ann_index"):
        assert index.build(progress=abort_the_first)
    assert len(killed) == 1
    assert [r.message for r in caplog.records if "writer failed" in r.message][0].count("SIGABRT") == 1
    assert len(index) == 12_000 and not list(tmp_path.glob("*.tmp"))


def test_forget_while_a_background_build_runs_leaves_nothing_of_the_rows(tmp_path, monkeypatch):
    """The build read the rows before the delete: it is stopped, and its temporary file goes with it."""
    monkeypatch.setattr(ann_search, "SMALL_SCOPE", 0)
    db = tmp_path / "e.db"
    items = filled(db, 6000)
    store = SQLiteStore(db, dim=DIM, ann="auto", ann_min_rows=10)
    store.search(query("", clustered(1)[0]))  # starts the background build
    assert store._building is not None
    gone = vectors_of(db, "peer = 'bob'")
    assert store.delete(workspace="w", peer="bob") == 3000
    assert holders(tmp_path, gone) == {}
    assert store.search(query("", clustered(1)[0], peer="ann"))  # and it serves (exact, or a new build)
    store.close()
    assert holders(tmp_path, gone) == {} and items


def test_doctor_lines_say_when_the_file_disagrees_with_the_store_or_is_unusable(tmp_path):
    import sqlite3

    db = tmp_path / "e.db"
    filled(db, 1000)
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    store.index_now()
    assert store.index_checks() == [(True, f"episodic: ANN index {db}.usearch: agrees with the store")]
    with sqlite3.connect(db) as raw:  # rows deleted behind the index's back (as by an older version's forget)
        raw.execute("DELETE FROM episodes WHERE rowid <= 30")
    [(ok, line)] = store.index_checks()
    assert not ok and "30 deleted rows still in them, 0 current rows missing from them" in line
    Path(f"{db}.usearch-scopes.json").write_text("{}")
    [(ok, line)] = store.index_checks()
    assert not ok and "no manifest vouches for the files" in line
    store.close()
    assert SQLiteStore(tmp_path / "none.db", dim=DIM, ann="usearch").index_checks() == []  # no file, no line


def test_when_the_writer_keeps_failing_exact_search_serves_and_forget_still_works(tmp_path, caplog):
    db = tmp_path / "e.db"
    items = filled(db, 300)
    Path(f"{db}.usearch.lock").mkdir()  # the writer cannot take its lock: it fails, twice
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    with caplog.at_level(logging.WARNING, logger="thoth_episodic"):
        hits = store.search(query("", clustered(300)[7], peer="bob", k=3))
    assert hits[0].episode.id == items[7].id and store._index is None
    assert [r.message.split(" (")[0] for r in caplog.records] == [
        "episodic: the ANN index writer failed",
        f"episodic: could not build the ANN index {db}.usearch; searching exactly",
    ]
    assert store.delete(workspace="w", ids=[items[7].id]) == 1
    assert store.search(query("", clustered(300)[7], peer="bob", k=3))[0].episode.id != items[7].id
    store.close()
