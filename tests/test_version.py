"""Tests of `hardmax.version`: the version's one home, which the package root re-exports and the installed
distribution's metadata agrees with."""

from __future__ import annotations

import importlib.metadata
import re

import hardmax
from hardmax.version import __version__


def test_the_version_is_a_release_number_and_the_packages():
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert hardmax.__version__ == __version__


def test_the_installed_metadata_says_the_same_version():
    assert importlib.metadata.version("hardmax") == __version__
