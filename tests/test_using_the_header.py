"""A consumer of the header compiles, and the launcher compiles and links, with the flags the
kernels were measured with (the compiles began in tests/test_header_compile.py)."""

import header_builds
from conftest import requires_nvcc


@requires_nvcc
def test_a_consumer_of_the_committed_header_compiles():
    header_builds.start_compiles()  # already running, unless this file runs on its own
    status, output = header_builds.result("consumer")
    assert status == 0, output[-5000:]


@requires_nvcc
def test_the_launcher_compiles_and_links():
    header_builds.start_compiles()
    status, output = header_builds.result("launcher")
    assert status == 0, output[-5000:]
