"""Gradient-disentangled embedding sharing (--embedding_sharing=gdes) in every encoder export:
a gdes pretraining model_dir exported to TF Hub, keras-hub, ONNX and the TF Serving
SavedModel gives the folded discriminator's states (generator table + delta), not the
generator table's alone."""

import os

import numpy as np
import pytest
import tensorflow as tf
from export_runs import TINY, real_inputs

from electra_tf.model import networks
from electra_tf.serving import exporters, saved_model, sources, tfhub


@pytest.fixture(scope="module")
def gdes_run(tmp_path_factory):
  """(model_dir, real inputs, folded encoder's states on them, the states without the delta)
  of a tiny gdes pretraining run: 3 steps, then a delta of material size on every row."""
  import tf_keras
  from testing_utils import make_batch

  from electra_tf.config import PretrainConfig
  from electra_tf.filenames import CHECKPOINT_SUBDIR, CKPT_NAME
  from electra_tf.training import artifacts, pretraining

  tf_keras.utils.set_random_seed(0)
  config = PretrainConfig(model=TINY, embedding_sharing="gdes", generator_fraction=0.5,
                          max_seq_length=32, max_predictions_per_seq=5, batch_size=4,
                          num_train_steps=3, warmup_steps=0, learning_rate=1e-2,
                          steps_per_execution=1)
  # Eager steps of the unfused model: the same train_step, without 15 s of tracing.
  model = pretraining.build_model(config, tf.distribute.get_strategy(), fused_kernels=False)
  model.run_eagerly = True
  batch = tf.data.Dataset.from_tensors(make_batch(config)).repeat()
  model.fit(batch, steps_per_epoch=config.num_train_steps, verbose=0)
  delta = model.discriminator.encoder.embeddings.word_embeddings_delta
  assert np.abs(delta.numpy()).max() > 1e-3, "the discriminator's loss trains the delta"
  # Three steps move only the rows of the batch's tokens: give every row a delta, so
  # real text would read the generator's table if an export dropped it.
  delta.assign_add(tf.random.normal(delta.shape, stddev=0.05, seed=1))

  model_dir = str(tmp_path_factory.mktemp("gdes") / "run")
  checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
  tf.train.CheckpointManager(checkpoint, os.path.join(model_dir, CHECKPOINT_SUBDIR), 1,
                             checkpoint_name=CKPT_NAME).save(config.num_train_steps)
  artifacts.save_or_check_run_config(model_dir, config, {})

  inputs = real_inputs("movies")
  feed = {k: tf.constant(v) for k, v in inputs.items()}
  folded = networks.standalone_discriminator(model.discriminator).encoder(feed, training=False)
  saved = delta.numpy()
  delta.assign(tf.zeros_like(delta))
  dropped = model.discriminator.encoder(feed, training=False).numpy()
  delta.assign(saved)
  np.testing.assert_allclose(model.discriminator.encoder(feed, training=False).numpy(),
                             folded.numpy(), atol=1e-5)
  return model_dir, inputs, folded.numpy(), dropped


def _check(got, gdes_run, atol):
  """`got` equals the folded states within `atol` and is far from the delta-less ones."""
  _, inputs, folded, dropped = gdes_run
  real = inputs["input_mask"].astype(bool)  # padded positions are nobody's output
  assert np.abs(folded - dropped)[real].max() > 100 * atol, "the delta is material"
  assert np.abs(got - folded)[real].max() < atol


def test_tfhub_keeps_the_delta(gdes_run, tmp_path):
  hub = pytest.importorskip("tensorflow_hub")

  model_dir, inputs, _, _ = gdes_run
  # The encoder half of --format=tfhub (the preprocessor has no weights).
  tfhub.write_encoder(sources.load_encoder(model_dir), str(tmp_path / "encoder"))
  encoder = hub.KerasLayer(str(tmp_path / "encoder"))
  out = encoder({"input_word_ids": inputs["input_ids"], "input_mask": inputs["input_mask"],
                 "input_type_ids": inputs["segment_ids"]})
  _check(out["sequence_output"].numpy(), gdes_run, 1e-5)


def test_keras_hub_keeps_the_delta(gdes_run, tmp_path):
  pytest.importorskip("keras_hub")
  import keras_hub
  from test_keras_hub import erf_gelu, keras_hub_states

  model_dir, inputs, _, _ = gdes_run
  exporters.export("keras_hub", model_dir, None, str(tmp_path / "preset"))
  backbone = erf_gelu(keras_hub.models.ElectraBackbone.from_preset(str(tmp_path / "preset")))
  _check(keras_hub_states(backbone, inputs)["sequence_output"], gdes_run, 1e-4)


def test_onnx_keeps_the_delta(gdes_run, tmp_path):
  ort = pytest.importorskip("onnxruntime")

  model_dir, inputs, _, _ = gdes_run
  out = str(tmp_path / "onnx")
  exporters.export("onnx", model_dir, None, out)
  session = ort.InferenceSession(os.path.join(out, "model.onnx"),
                                 providers=["CPUExecutionProvider"])
  got = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))
  _check(got["sequence_output"], gdes_run, 1e-4)


def test_saved_model_keeps_the_delta(gdes_run, tmp_path):
  model_dir, inputs, _, _ = gdes_run
  path = saved_model.export(model_dir, "pretraining", str(tmp_path / "serving"))
  serve = tf.saved_model.load(path).signatures["serving_default"]
  out = serve(**{k: tf.constant(v) for k, v in inputs.items()})
  _check(out["hidden_states"].numpy(), gdes_run, 1e-5)


def test_task_models_start_from_the_folded_table(gdes_run):
  """The ONNX and TFLite task models are fine-tuned models: fine-tuning from a gdes run
  restores its encoder (finetune.py's --init_checkpoint) with the delta folded in."""
  from electra_tf.checkpoints import converter
  from electra_tf.config import FinetuneConfig
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task

  model_dir, inputs, _, _ = gdes_run
  config = FinetuneConfig(task="classification", max_seq_length=48)
  model = build_finetune_model(model_for_task(config, TINY, 2))
  converter.restore_into(model_dir, discriminator=model.encoder)
  feed = {k: tf.constant(v) for k, v in inputs.items()}
  _check(model.encoder(feed, training=False).numpy(), gdes_run, 1e-5)
