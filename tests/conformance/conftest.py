"""The conformance tests start real daemons in network namespaces and as their own users: root only."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if os.geteuid() != 0:
        raise pytest.UsageError("tests/conformance starts real daemons in namespaces: run them as root")
