"""Our own formats: pretraining model_dirs, discriminator exports and converted folders read
back exactly; an imported checkpoint continues pretraining with no optimizer slots."""

import numpy as np
import tensorflow as tf

TOL = 1e-4


def _train(model, batch, steps):
  """`steps` optimizer steps; eager, since tracing costs more than these tiny steps."""
  from electra_tf.training.optimizer import WarmupLinearDecay, create_optimizer

  model.compile(optimizer=create_optimizer("adamw", WarmupLinearDecay(1e-2, 20, 0)),
                steps_per_execution=1, run_eagerly=True)
  dataset = tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in batch.items()}).repeat()
  return model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0).history


def _same_outputs(a, b, vocab_size):
  from hf_twins import make_inputs, our_outputs

  ids, mask, seg = make_inputs(vocab_size, length=10)
  for x, y in zip(our_outputs(a, ids, mask, seg)[1] + [our_outputs(a, ids, mask, seg)[0]],
                  our_outputs(b, ids, mask, seg)[1] + [our_outputs(b, ids, mask, seg)[0]]):
    np.testing.assert_array_equal(x, y)


def test_pretraining_model_dir_reads_and_exports_after_training(tmp_path, micro_config):
  from hf_twins import check_hf_export
  from testing_utils import make_batch

  from electra_tf.checkpoints import native
  from electra_tf.checkpoints.converter import export_hf, export_tf1, load
  from electra_tf.model.pretrainer import ElectraPretrainer
  from electra_tf.training import artifacts

  model = ElectraPretrainer(micro_config)
  history = _train(model, make_batch(micro_config), steps=3)
  assert np.isfinite(history["loss"][-1])
  model_dir = tmp_path / "run"
  artifacts.save_or_check_run_config(str(model_dir), micro_config, {"vocab_md5": None})
  ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
  tf.train.CheckpointManager(ckpt, str(model_dir / "checkpoints"), max_to_keep=2).save()
  native.save_discriminator(model.discriminator, None, str(model_dir / "discriminator"))

  loaded = load(str(model_dir))
  assert loaded.source == "model_dir" and loaded.config == micro_config
  assert loaded.report.extra > 0  # optimizer slots and step counters, skipped
  assert loaded.generator.embeddings is loaded.discriminator.embeddings
  _same_outputs(loaded.discriminator, model.discriminator, 10)
  _same_outputs(loaded.generator, model.generator, 10)
  export = load(str(model_dir / "discriminator"))
  assert export.source == "discriminator_export" and export.generator is None
  _same_outputs(export.discriminator, model.discriminator, 10)
  prefix = load(str(model_dir / "checkpoints" / "ckpt-1"))  # a prefix: config one folder up
  _same_outputs(prefix.generator, model.generator, 10)

  # The reverse direction after training: transformers computes what the trained nets do.
  export_hf(str(model_dir), str(tmp_path / "hf"))
  diffs = check_hf_export(tmp_path / "hf", model.generator, model.discriminator, 10)
  print("after 3 steps", diffs)
  # And to the authors' TF1 layout: read back, the same sizes (2 heads where their rule
  # gives 1, no dropout: both from bert_config.json) and the same outputs.
  tf1 = load(export_tf1(str(model_dir), str(tmp_path / "tf1")))
  assert tf1.source == "tf1"
  assert (tf1.config.model, tf1.config.generator) == (micro_config.model, micro_config.generator)
  _same_outputs(tf1.discriminator, model.discriminator, 10)
  _same_outputs(tf1.generator, model.generator, 10)


def test_imported_checkpoint_continues_pretraining(tmp_path):
  """convert --from=tf1 -> ckpt/small -> restore_into a fresh pretrainer -> one train step."""
  import torch
  import transformers
  from hf_twins import (
    hf_outputs,
    make_inputs,
    max_diff,
    our_outputs,
    randomize,
    tf1_tensors,
    write_name_based_checkpoint,
  )
  from testing_utils import make_batch

  from electra_tf.checkpoints.converter import load, restore_into, save
  from electra_tf.model.pretrainer import ElectraPretrainer

  shape = {"vocab_size": 60, "embedding_size": 16, "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 1, "intermediate_size": 96, "max_position_embeddings": 32}
  disc = randomize(transformers.ElectraForPreTraining(transformers.ElectraConfig(**shape)), 8)
  gen = randomize(transformers.ElectraForMaskedLM(transformers.ElectraConfig(
      **{**shape, "hidden_size": 16, "intermediate_size": 64})), 9)
  with torch.no_grad():
    gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
  write_name_based_checkpoint(str(tmp_path / "model.ckpt"), tf1_tensors(disc, gen))
  ckpt_dir = save(load(str(tmp_path / "model.ckpt")), str(tmp_path / "ckpt" / "small"))

  config = load(ckpt_dir).config.replace(
      batch_size=4, max_seq_length=12, max_predictions_per_seq=3, num_train_steps=10,
      warmup_steps=1, steps_per_execution=1)
  model = ElectraPretrainer(config)
  report = restore_into(ckpt_dir, model.generator, model.discriminator)
  assert report.restored == len(model.trainable_variables) and not report.initialized
  ids, mask, seg = make_inputs(60)
  for net, twin in ((model.discriminator, disc), (model.generator, gen)):
    assert max_diff(our_outputs(net, ids, mask, seg)[0], hf_outputs(twin, ids, mask, seg)[0],
                    mask) < TOL
  before = [v.numpy() for v in model.trainable_variables]
  history = _train(model, make_batch(config), steps=1)
  assert int(model.optimizer.iterations) == 1 and np.isfinite(history["loss"][0])
  # Every variable moves, except key biases: softmax ignores a score shift shared by all
  # keys, so their gradient is zero up to rounding.
  stuck = [v.name for a, v in zip(before, model.trainable_variables)
           if np.array_equal(a, v.numpy()) and "key/bias" not in v.name]
  assert not stuck

  # Same object paths as a pretraining checkpoint: a plain Checkpoint restore reads it too.
  fresh = ElectraPretrainer(config)
  tf.train.Checkpoint(model=fresh).read(f"{ckpt_dir}/ckpt").expect_partial()
  assert max_diff(our_outputs(fresh.discriminator, ids, mask, seg)[0],
                  hf_outputs(disc, ids, mask, seg)[0], mask) < TOL


def test_restore_into_a_bare_encoder_for_fine_tuning(tmp_path):
  import transformers
  from hf_twins import hf_outputs, hidden_diff, make_inputs, randomize, tf_inputs

  from electra_tf.checkpoints.converter import restore_into
  from electra_tf.config import EncoderConfig
  from electra_tf.model.encoder import ElectraEncoder

  shape = {"vocab_size": 70, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 64, "max_position_embeddings": 24}
  bert = randomize(transformers.BertModel(transformers.BertConfig(**shape)), 10)
  bert.save_pretrained(tmp_path)
  encoder = ElectraEncoder(EncoderConfig(
      vocab_size=70, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
      embedding_size=32, max_position_embeddings=24))
  ids, mask, seg = make_inputs(70)
  encoder(tf_inputs(ids, mask, seg))
  report = restore_into(str(tmp_path), discriminator=encoder)
  assert report.extra == 2  # the pooler
  _, ours = encoder(tf_inputs(ids, mask, seg), output_hidden_states=True)
  assert hidden_diff([h.numpy() for h in ours], hf_outputs(bert, ids, mask, seg)[1], mask) < TOL


def test_mlm_run_export_fine_tunes_from_its_generator(tmp_path, micro_config):
  """An MLM-objective run exports its generator as the "discriminator" for fine-tuning."""
  from hf_twins import make_inputs, randomize_tf, tf_inputs

  from electra_tf.checkpoints import native
  from electra_tf.checkpoints.converter import load, restore_into
  from electra_tf.model.encoder import ElectraEncoder
  from electra_tf.model.pretrainer import ElectraPretrainer

  config = micro_config.replace(objective="mlm")
  model = ElectraPretrainer(config)
  randomize_tf([model.generator], seed=13)
  native.save_discriminator(model.generator, None, str(tmp_path / "discriminator"))
  loaded = load(str(tmp_path / "discriminator"))
  assert loaded.generator is not None and loaded.discriminator is None
  assert loaded.config.objective == "mlm"
  _same_outputs(loaded.generator, model.generator, 10)

  ids, mask, seg = make_inputs(10, length=10)
  encoder = ElectraEncoder(config.model)
  encoder(tf_inputs(ids, mask, seg))
  report = restore_into(str(tmp_path / "discriminator"), discriminator=encoder)
  assert "masked LM" in report.summary()
  np.testing.assert_array_equal(encoder(tf_inputs(ids, mask, seg)).numpy(),
                                model.generator.encoder(tf_inputs(ids, mask, seg)).numpy())
