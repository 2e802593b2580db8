"""Gradient accumulation on two replicas matches one device on the whole batch (a file apart
from test_accumulation.py, so the two run in parallel)."""

import pytest
from accumulation_runs import assert_same_update, batches, fit, reference, two_replicas


@pytest.mark.parametrize("optimizer", ["adamw"])  # LAMB: one device, test_accumulation.py
def test_two_replicas_accumulating_match_one_device_on_the_whole_batch(micro_config, optimizer):
  """Dropout off: the replicas draw their masks from seeds of their own."""
  config = micro_config.replace(batch_size=8)
  candidate = fit(config.replace(gradient_accumulation_steps=2), batches(config),
                  two_replicas(), optimizer)
  assert_same_update(reference(config, optimizer), candidate)
