"""Fixtures of the export tests (tests/serving/export_runs.py makes them)."""

import pytest
from export_runs import make_runs


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
  """{name: (Keras model, fine-tuned model dir)} of export_runs.RUNS, and "disc":
  (Discriminator, its checkpoint dir). Made once per test process."""
  return make_runs(tmp_path_factory.mktemp("runs"))
