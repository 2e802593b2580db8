"""Shared test setup: two logical CPU devices (for MirroredStrategy tests) and tiny configs."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Must happen before TensorFlow creates its devices; tests that need one device use /cpu:0.
_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])


# pytest-xdist's `--dist loadfile` hands whole files to the two workers in collection order
# (pytest.ini turns off its reordering by test count, which put the files of one or two long
# subprocess tests last, where one worker ran them alone). Longest first, from the per-file
# sums of `pytest --junitxml` (seconds in comments, where measured); everything else after
# them in its usual order.
_LONGEST_FILES_FIRST = (
    "tests/test_ablation_quick.py",  # about 280 on a quiet machine
    "tests/model/test_accumulation.py",  # 500 (-n 0, beside a busy background job)
    "tests/training/test_two_phase.py",  # 206 (beside a busy background job)
    "tests/model/test_accumulation_replicas.py",
    "tests/training/test_failure_handling.py",  # 198
    "tests/test_pretrain_cli.py",  # 162
    "tests/training/test_multi_worker.py",  # 155
    "tests/hostile/test_model_commands.py",
    "tests/hostile/test_data_commands.py",
    "tests/training/test_fault_tolerance_replicas.py",  # 130
    "tests/test_finetune_cli.py",  # 125
    "tests/test_finetune_tagging.py",  # 178 (beside a busy background job)
    "tests/model/test_pretrainer.py",  # 110
    "tests/training/test_fault_tolerance.py",  # 106
    "tests/serving/test_saved_model.py",  # 60
    "tests/test_ram_end_to_end.py",  # 36 (47 beside a busy background job)
    "tests/data/test_data_pipeline.py",  # 28
    "tests/checkpoints/test_errors.py",  # 20
)


def pytest_collection_modifyitems(config, items):
  del config
  rank = {path: i for i, path in enumerate(_LONGEST_FILES_FIRST)}
  items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture
def micro_config():
  """A 10-token-vocab ELECTRA config without dropout: small enough for golden values."""
  from electra_tf.config import EncoderConfig, PretrainConfig

  model = EncoderConfig(vocab_size=10, hidden_size=8, num_layers=2, num_heads=2,
                        intermediate_size=16, embedding_size=4, max_position_embeddings=16,
                        dropout_rate=0.0, attention_dropout_rate=0.0)
  return PretrainConfig(model=model, generator_fraction=0.5, max_seq_length=12,
                        max_predictions_per_seq=3, batch_size=4, num_train_steps=20,
                        warmup_steps=2, learning_rate=1e-2, steps_per_execution=1,
                        checkpoint_steps=10, log_steps=5)


@pytest.fixture
def micro_batch(micro_config):
  from testing_utils import make_batch

  return make_batch(micro_config)
