"""The benchmarks' shared modules import on a fresh install and their examples hold."""

import doctest
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize("path", ["_harness.py", "apps/_rankside.py"])
def test_shared_benchmark_module_examples(path):
    spec = importlib.util.spec_from_file_location(Path(path).stem, BENCHMARKS / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0
