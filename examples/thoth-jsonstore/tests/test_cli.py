"""thoth-jsonstore through the real `thoth`, in a home made by `thoth init` whose episodic backend is jsonstore."""

import json

from thoth_core.testing import run_thoth


def test_ask_recall_and_forget_go_through_the_json_file(thoth_env, thoth_home):
    assert run_thoth("init", "home").returncode == 0
    home = thoth_env / "home"
    (home / "replies.json").write_text('[{"reply": "Noted: your cat is Miso."}]')  # the `replay` model's script
    for key, value in [
        ("plugins.episodic.backend", "jsonstore"),
        ("thoth.model", "replay"),
        ("models.replay.file", "replies.json"),
    ]:
        assert run_thoth("config", "set", key, value, cwd=home).returncode == 0

    for peer, text in [("ann", "my cat is called Miso"), ("bob", "my dog is called Rex")]:
        asked = run_thoth("ask", text, "--peer", peer, cwd=home)
        assert asked.returncode == 0, asked.stderr
    versions = json.loads((thoth_home / "episodes.json").read_text())["versions"]
    assert sorted(row["user"] for row in versions) == ["my cat is called Miso", "my dog is called Rex"]

    recalled = run_thoth("episodes", "search", "what is my cat called?", "--peer", "ann", "--json", cwd=home)
    assert recalled.returncode == 0, recalled.stderr
    [hit] = json.loads(recalled.stdout)  # ann's episode only, never bob's
    assert hit["user"] == "my cat is called Miso" and hit["why"]["bm25_rank"] == 1

    forgot = run_thoth("forget", "--peer", "ann", "--json", cwd=home)
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(forgot.stdout)["episodic"] == {"episodes": 1}
    versions = json.loads((thoth_home / "episodes.json").read_text())["versions"]
    assert [row["peer"] for row in versions] == ["bob"]
    assert json.loads(run_thoth("episodes", "search", "cat", "--peer", "ann", "--json", cwd=home).stdout) == []
