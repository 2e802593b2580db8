"""A process's part in a run: chief or worker, one host or several, and replica agreement."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tensorflow as tf

# Grappler passes that round each replica's optimizer update differently (see below).
_REPLICA_ROUNDING_PASSES = ("constant_folding", "arithmetic_optimization")


def worker_role(strategy) -> tuple[bool, int]:
  """(is_chief, task_id) under multi-worker strategies; (True, 0) otherwise."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not getattr(resolver, "task_type", None):
    return True, 0
  task_type, task_id = resolver.task_type, resolver.task_id or 0
  has_chief = "chief" in resolver.cluster_spec().as_dict()
  is_chief = task_type == "chief" or (not has_chief and task_type == "worker" and task_id == 0)
  return is_chief, task_id


def is_multi_worker(strategy) -> bool:
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not getattr(resolver, "task_type", None):
    return False
  return sum(len(tasks) for tasks in resolver.cluster_spec().as_dict().values()) > 1


def collective_error(exc: Exception) -> str:
  """The informative line of a failed collective (TF puts 'Graph execution error:' first)."""
  text = getattr(exc, "message", None) or str(exc)
  for line in (ln.strip() for ln in text.splitlines()):
    if line and not line.startswith(("Graph execution error", "Detected at node", "File ",
                                      "[[", "{{")):
      return line[:240]
  return type(exc).__name__


@contextlib.contextmanager
def replica_copies_kept_equal(enabled: bool = True) -> Iterator[None]:
  """Within the block, Grappler does not rewrite each replica's optimizer update with
  different rounding; on exit the options are as they were.

  Under MirroredStrategy every replica applies the (identical, all-reduced) gradients to its
  own copy of the weights. With Grappler's constant folding and arithmetic optimisation on,
  the copies on two CPU devices can drift apart by an ulp within a few steps, and a
  checkpoint keeps only the first copy, so a resumed run would go on from other weights than
  the run it continued. Turning both passes off keeps the copies bit-equal. The options are
  read when a function runs, so the block must hold every call of the train function.
  """
  if not enabled:
    yield
    return
  saved = tf.config.optimizer.get_experimental_options()
  tf.config.optimizer.set_experimental_options({name: False for name in _REPLICA_ROUNDING_PASSES})
  try:
    yield
  finally:
    # None puts a pass back to TensorFlow's default.
    tf.config.optimizer.set_experimental_options(
        {name: saved.get(name) for name in _REPLICA_ROUNDING_PASSES})
