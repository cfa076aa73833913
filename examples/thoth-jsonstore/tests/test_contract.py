"""The contract every episodic backend passes, run against JsonStore."""

import pytest
from thoth_episodic.contract import StoreContract
from thoth_jsonstore import JsonStore


class TestJsonStore(StoreContract):
    @pytest.fixture
    def open_store(self, tmp_path):
        return lambda: JsonStore(tmp_path / "episodes.json")
