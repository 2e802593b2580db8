"""tf.distribute strategy construction, CPU splitting and precision policy."""

from __future__ import annotations

import glob
import json
import os
import socket
import threading
import urllib.parse

import tensorflow as tf
import tf_keras

from electra_tf.config import PRECISIONS, STRATEGIES
from electra_tf.errors import UserError


def split_cpu(num_devices: int) -> None:
  """Expose the host CPU as `num_devices` logical devices (before any op runs)."""
  if num_devices <= 1:
    return
  cpus = tf.config.list_physical_devices("CPU")
  try:
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])
  except RuntimeError as exc:
    raise UserError(f"cannot split the CPU into {num_devices} devices after TensorFlow "
                    f"started: {exc}") from exc


def _local_tpu_present() -> bool:
  return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def _check_tpu_address(address: str, timeout: float) -> None:
  parsed = urllib.parse.urlparse(address)
  host, port = parsed.hostname, parsed.port or 8470
  try:
    with socket.create_connection((host, port), timeout=timeout):
      pass
  except OSError as exc:
    raise UserError(f"no TPU reachable at {address} ({exc}); check --tpu and that the TPU "
                    "is running") from exc


def _connect_tpu(tpu: str | None, timeout: float):
  """Resolve and initialise a TPU within `timeout` seconds, or raise UserError."""
  name = tpu or os.environ.get("TPU_NAME")
  if not name and not _local_tpu_present():
    raise UserError("no TPU reachable: this machine has no TPU devices and neither --tpu nor "
                    "TPU_NAME is set; pass --tpu=NAME (or grpc://host:port) or use "
                    "--strategy=one_device/mirrored")
  if name and name.startswith("grpc://"):
    _check_tpu_address(name, timeout=min(timeout, 10.0))
  result: dict = {}

  def connect():
    try:
      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name or "local")
      if name and name != "local":
        tf.config.experimental_connect_to_cluster(resolver)
      tf.tpu.experimental.initialize_tpu_system(resolver)
      result["strategy"] = tf.distribute.TPUStrategy(resolver)
    except Exception as exc:  # reported below as one line
      result["error"] = exc

  # TPUClusterResolver and connect can block indefinitely on a bad name: bound them.
  thread = threading.Thread(target=connect, daemon=True)
  thread.start()
  thread.join(timeout)
  if thread.is_alive():
    raise UserError(f"no TPU reachable: connecting to {name or 'the local TPU'} did not finish "
                    f"in {timeout:.0f}s; check --tpu and the TPU's state")
  if "error" in result:
    first_line = str(result["error"]).strip().splitlines()[0] if str(result["error"]) else ""
    raise UserError(f"no TPU reachable at {name or 'local'}: "
                    f"{type(result['error']).__name__}: {first_line}")
  return result["strategy"]


def make_strategy(name: str = "one_device", tpu: str | None = None, cpu_devices: int = 0,
                  tpu_timeout: float = 60.0) -> tf.distribute.Strategy:
  """The tf.distribute strategy for `name`.

  Args:
    name: one of STRATEGIES.
    tpu: TPU name or grpc:// address for "tpu".
    cpu_devices: split the host CPU into this many logical devices (mirrored on a laptop).
    tpu_timeout: seconds to wait for a TPU before giving up with a clear error.
  """
  if name not in STRATEGIES:
    raise UserError(f"unknown --strategy {name!r}; choose one of {list(STRATEGIES)}")
  if cpu_devices < 0:
    raise UserError(f"--cpu_devices must be >= 0, got {cpu_devices}")
  if name == "multi_worker_mirrored":
    # Collectives must be configured before anything initialises the TF context.
    if "TF_CONFIG" not in os.environ:
      raise UserError("--strategy=multi_worker_mirrored needs TF_CONFIG describing the cluster "
                      "(see docs/pretraining.md, 'Strategies')")
    try:
      json.loads(os.environ["TF_CONFIG"])
    except json.JSONDecodeError as exc:
      raise UserError(f"TF_CONFIG is not valid JSON: {exc}") from exc
    return tf.distribute.MultiWorkerMirroredStrategy()
  split_cpu(cpu_devices)
  gpus = tf.config.list_logical_devices("GPU")
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  if name == "mirrored":
    if gpus:
      return tf.distribute.MirroredStrategy([d.name for d in gpus])
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    # NCCL is GPU-only; CPU replicas reduce through one device.
    return tf.distribute.MirroredStrategy(
        cpus, cross_device_ops=tf.distribute.ReductionToOneDevice())
  return _connect_tpu(tpu, tpu_timeout)


def set_precision(precision: str) -> None:
  """Set the tf_keras global dtype policy; logits and losses stay float32 in the model."""
  if precision not in PRECISIONS:
    raise UserError(f"unknown --precision {precision!r}; choose one of {list(PRECISIONS)}")
  tf_keras.mixed_precision.set_global_policy(precision)
