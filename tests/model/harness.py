"""A layer/model contract check in the spirit of keras-hub's TestCase.run_layer_test.

`run_layer_test(case, tmp_path)` builds `case.cls(**case.init_kwargs)` and checks:

- output shapes: the call's outputs have `case.output_shapes` (a structure of tuples,
  None for a dimension not checked);
- config: every constructor argument is in get_config() with the value passed (config
  dataclasses as their dicts, layers by their own config), the config is JSON-serializable,
  and from_config rebuilds an object with the same config, the same variable names and
  shapes, and, given the original's weights, the same outputs;
- save and load: a tf.train.Checkpoint of the object, read into the object made from the
  config with its weights zeroed, matches every saved value and gives identical outputs;
- mixed precision: made under the mixed_bfloat16 policy, its variables stay float32 and
  its outputs have `case.mixed_dtypes` (logits float32, hidden states bfloat16).

Outputs are compared with training=False, so dropout does not enter.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras


@dataclasses.dataclass
class Case:
  """One layer or model under test.

  Args:
    cls: the class; its from_config rebuilds it.
    init_kwargs: constructor arguments (use non-default values, so a dropped one shows), or
      a function making them (for layer arguments, made under the policy of the moment).
    inputs: makes the positional call arguments (a tuple), fresh on each call.
    output_shapes: the outputs' shapes, a structure matching the outputs.
    mixed_dtypes: the outputs' dtypes under mixed_bfloat16, the same structure.
    call_kwargs: further call arguments.
    call: calls the object (default: obj(*inputs, training=False, **call_kwargs)).
  """

  cls: type
  init_kwargs: dict[str, Any] | Callable[[], dict[str, Any]]
  inputs: Callable[[], tuple]
  output_shapes: Any
  mixed_dtypes: Any
  call_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
  call: Callable[[Any, tuple], Any] | None = None

  def kwargs(self) -> dict[str, Any]:
    return self.init_kwargs() if callable(self.init_kwargs) else dict(self.init_kwargs)

  def run(self, obj):
    if self.call is not None:
      return self.call(obj, self.inputs())
    return obj(*self.inputs(), training=False, **self.call_kwargs)


def _holds(stored: Any, passed: Any) -> bool:
  """Whether get_config's `stored` entry stands for the constructor argument `passed`."""
  if dataclasses.is_dataclass(passed):
    return stored == dataclasses.asdict(passed)
  if isinstance(passed, tf_keras.layers.Layer):  # serialized: {"class_name", "config", ...}
    return stored["class_name"] == type(passed).__name__ and stored["config"] == (
        passed.get_config())
  if isinstance(passed, tf_keras.initializers.Initializer):
    revived = tf_keras.initializers.get(stored)
    return type(revived) is type(passed) and revived.get_config() == passed.get_config()
  if callable(passed):  # an activation function
    return tf_keras.activations.get(stored) is passed
  return stored == passed


def _numpy(outputs) -> list[np.ndarray]:
  return [np.asarray(t) for t in tf.nest.flatten(outputs)]


def _assert_same_outputs(expected, actual, what: str) -> None:
  tf.nest.assert_same_structure(expected, actual)
  for a, b in zip(_numpy(expected), _numpy(actual)):
    np.testing.assert_array_equal(a, b, err_msg=what)


def _variables(obj) -> list[tuple[str, tuple]]:
  return [(v.name, tuple(v.shape)) for v in obj.weights]


def _each_output(expected, outputs, check: Callable[[Any, tf.Tensor], None]) -> None:
  """check(expectation, tensor) for each output; `expected` mirrors the outputs' nesting."""
  if isinstance(outputs, dict):
    assert sorted(outputs) == sorted(expected), (sorted(outputs), sorted(expected))
    for key, value in outputs.items():
      _each_output(expected[key], value, check)
  elif isinstance(outputs, (list, tuple)):
    assert len(outputs) == len(expected), (len(outputs), expected)
    for want, value in zip(expected, outputs):
      _each_output(want, value, check)
  else:
    check(expected, outputs)


def check_output_shapes(case: Case, outputs) -> None:
  def check(expected, tensor):
    assert len(expected) == len(tensor.shape), (expected, tensor.shape)
    for want, got in zip(expected, tensor.shape):
      assert want is None or want == got, (expected, tensor.shape)

  _each_output(case.output_shapes, outputs, check)


def check_config_round_trip(case: Case, obj, kwargs, outputs):
  """Checks get_config and from_config; returns the clone (built, with obj's weights)."""
  config = obj.get_config()
  json.dumps(config)  # a config must be plain data
  for key, value in kwargs.items():
    assert key in config, f"{case.cls.__name__}.get_config() drops {key!r}"
    assert _holds(config[key], value), (
        f"{case.cls.__name__}.get_config()[{key!r}] is {config[key]!r}, not {value!r}")
  clone = case.cls.from_config(config)
  case.run(clone)
  assert clone.get_config() == config
  assert _variables(clone) == _variables(obj)
  clone.set_weights(obj.get_weights())
  _assert_same_outputs(outputs, case.run(clone), f"{case.cls.__name__} from_config")
  return clone


def check_checkpoint_round_trip(case: Case, obj, outputs, fresh, directory) -> None:
  """obj's checkpoint read into `fresh` (an object of the same config), zeroed first."""
  path = tf.train.Checkpoint(layer=obj).write(str(directory / "ckpt"))
  for variable in fresh.weights:
    variable.assign(tf.zeros_like(variable))
  status = tf.train.Checkpoint(layer=fresh).read(path)
  status.assert_consumed()
  _assert_same_outputs(outputs, case.run(fresh), f"{case.cls.__name__} checkpoint")


def check_mixed_precision(case: Case) -> None:
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    obj = case.cls(**case.kwargs())
    outputs = case.run(obj)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  float_variables = [v for v in obj.weights if v.dtype.is_floating]
  assert all(v.dtype == tf.float32 for v in float_variables), [
      (v.name, v.dtype) for v in float_variables if v.dtype != tf.float32]

  def check(expected, tensor):
    assert tensor.dtype == expected, (case.cls.__name__, tensor.dtype, expected)

  _each_output(case.mixed_dtypes, outputs, check)


def run_layer_test(case: Case, tmp_path) -> None:
  """Every contract of the module docstring, on one freshly made object."""
  tf_keras.utils.set_random_seed(0)
  kwargs = case.kwargs()
  obj = case.cls(**kwargs)
  outputs = case.run(obj)
  check_output_shapes(case, outputs)
  clone = check_config_round_trip(case, obj, kwargs, outputs)
  check_checkpoint_round_trip(case, obj, outputs, clone, tmp_path)
  check_mixed_precision(case)
