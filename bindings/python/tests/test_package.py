"""The package as a user installs it: its version is the workspace's, and a wheel carries the
library (checked when ``TETHER_EXPECT_BUNDLED=1``, as ``.ci/run`` sets for the installed
wheel)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import tether
from tether import _ffi

WORKSPACE = Path(__file__).resolve().parents[3]


def test_the_version_is_the_workspaces() -> None:
    cargo = (WORKSPACE / "Cargo.toml").read_text()
    match = re.search(r'\[workspace\.package\][^\[]*?\nversion = "([^"]+)"', cargo)
    assert match is not None
    assert tether.__version__ == match.group(1)


@pytest.mark.skipif(
    os.environ.get("TETHER_EXPECT_BUNDLED") != "1", reason="only for an installed wheel"
)
def test_the_wheel_carries_the_library() -> None:
    assert "TETHER_LIBRARY" not in os.environ
    path = tether.library_path()
    assert path.parent == Path(_ffi.__file__).resolve().parent, path
    assert path.name.startswith("_native")
    assert tether.ABI_VERSION >= 1
