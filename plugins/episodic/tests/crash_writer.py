"""Child process of test_crash: writes episodes through the plugin's write path, printing each acknowledged id."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from thoth_episodic import plugin
from thoth_episodic.memory import memory_for
from thoth_episodic.records import Episode

from thoth_core.testing import make_test_runtime


def main(home: str, synchronous: str) -> None:
    runtime = make_test_runtime(
        Path(home), {"episodic": plugin}, config={"plugins": {"episodic": {"synchronous": synchronous}}}
    )
    memory = memory_for(runtime)
    memory.embed(["warm up"])
    out = threading.Lock()

    def burst(worker: int) -> None:
        for i in range(100_000):
            episode = memory.write(
                Episode(workspace="default", peer="ann", thread=f"w{worker}", user=f"burst {worker} note {i} " * 5)
            )
            with out:
                sys.stdout.write(episode.id + "\n")
                sys.stdout.flush()

    threads = [threading.Thread(target=burst, args=(w,)) for w in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
