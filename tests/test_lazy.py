"""Tests of `hardmax.lazy`: `lazy_exports` gives a package `__all__`, `__getattr__` and `__dir__` that import a
module on the first use of one of its names, store the name, and refuse unknown names as Python does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hardmax.lazy import lazy_exports


def test_names_are_sorted_with_the_extra_ones_and_dir_lists_them():
    names, _, dir_ = lazy_exports("pkg", {"sqrt": "math", "dumps": "json"}, {}, extra=["local"])
    assert names == dir_() == ["dumps", "local", "sqrt"]


def test_a_name_is_looked_up_in_its_module_once_and_stored():
    namespace: dict = {}
    _, getattr_, _ = lazy_exports("pkg", {"sqrt": "math"}, namespace)
    import math

    assert getattr_("sqrt") is math.sqrt and namespace == {"sqrt": math.sqrt}


def test_an_unknown_name_is_an_attribute_error_naming_the_package():
    _, getattr_, _ = lazy_exports("pkg", {"sqrt": "math"}, {})
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'cos'"):
        getattr_("cos")


def test_import_hardmax_imports_no_module_before_its_names_are_used():
    code = ("import sys, hardmax; assert 'hardmax.dynamics' not in sys.modules; "
            "hardmax.simulate; assert 'hardmax.dynamics' in sys.modules; assert 'simulate' in vars(hardmax)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
