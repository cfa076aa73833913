"""`thoth doctor`'s service line: none advertised is fine, advertised but not answering is a problem."""

from __future__ import annotations

import socket

from thoth_serve.doctor import service_line

from thoth_core.service import advertised


def test_no_service_is_fine(tmp_path):
    ok, what = service_line(tmp_path)
    assert ok is True and what.startswith("service: none running")


def test_an_advertised_service_that_does_not_answer_is_a_problem(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with advertised(tmp_path, url=f"http://127.0.0.1:{port}", token=None):  # this (live) pid advertises it
        ok, what = service_line(tmp_path)
    assert ok is False and what.startswith(f"service: http://127.0.0.1:{port} is advertised but does not answer")
    assert "\n" not in what
