"""Progress lines, TensorBoard scalars and checkpoint saves from a real short fit."""

import io
import os

import tensorflow as tf

from electra_tf.model.pretrainer import ElectraPretrainer
from electra_tf.training.callbacks import CheckpointSaver, ProgressLogger
from electra_tf.training.optimizer import create_optimizer


def test_progress_tensorboard_and_checkpoints(tmp_path, micro_config, micro_batch):
  model = ElectraPretrainer(micro_config)
  model.compile(optimizer=create_optimizer("adamw", 1e-3), steps_per_execution=2)
  stream = io.StringIO()
  progress = ProgressLogger(total_steps=12, log_steps=4, tokens_per_step=48,
                            summary_dir=str(tmp_path / "tb"), examples_per_epoch=24,
                            batch_size=4, stream=stream)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path / "ck"),
                                       max_to_keep=2)
  dataset = tf.data.Dataset.from_tensors(
      {k: tf.constant(v) for k, v in micro_batch.items()}).repeat()
  model.fit(dataset, epochs=1, steps_per_epoch=12, verbose=0,
            callbacks=[progress, CheckpointSaver(manager, every=5)])
  lines = [line for line in stream.getvalue().splitlines() if line.startswith("step ")]
  assert [line.split(" | ")[0] for line in lines] == ["step 2/12", "step 4/12", "step 8/12",
                                                       "step 12/12"]
  assert "tok/s" in lines[-1] and "ETA 0m00s" in lines[-1] and "data pass 2.00" in lines[-1]
  assert "disc_auc" in lines[0] and "gen_accuracy" in lines[0]
  assert [h["step"] for h in progress.history] == [2, 4, 8, 12]
  # Saves at the first step past each multiple of 5 (executions end on even steps) and at the end.
  assert [int(p.rsplit("-", 1)[1]) for p in manager.checkpoints] == [10, 12]
  events = [f for f in os.listdir(tmp_path / "tb") if "tfevents" in f]
  tags = set()
  for event in tf.compat.v1.train.summary_iterator(str(tmp_path / "tb" / events[0])):
    tags |= {v.tag for v in event.summary.value}
  assert {"loss", "disc_auc", "learning_rate", "tokens_per_s"} <= tags
