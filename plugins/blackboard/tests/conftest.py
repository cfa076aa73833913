from __future__ import annotations

import shutil

import pytest
from thoth_blackboard.memory import InProcessBoard
from thoth_blackboard.sqlite_board import SqliteBoard
from thoth_blackboard.testing import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (plugins/blackboard/setup-services installs it)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.kill()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def board(request, tmp_path):
    if request.param == "memory":
        made = InProcessBoard()
    elif request.param == "sqlite":
        made = SqliteBoard(tmp_path / "board.db", name="test")
    else:
        from thoth_blackboard.redis_board import RedisBoard

        server = request.getfixturevalue("redis_server")
        made = RedisBoard(server.url, namespace=f"test:{tmp_path.name}")
    yield made
    await made.clear()
    await made.close()
