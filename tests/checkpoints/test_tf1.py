"""An authors'-layout TF1 checkpoint (the exact names of ELECTRA_SPEC section 6) imports and
computes what its Hugging Face twin computes."""

import json

import numpy as np

TOL = 1e-4


def _twins(disc_shape, gen_shape=None, seed=0):
  """Random HF discriminator (+ generator sharing its embeddings, as in the authors' model)."""
  import torch
  import transformers
  from hf_twins import randomize

  disc = randomize(transformers.ElectraForPreTraining(transformers.ElectraConfig(**disc_shape)),
                   seed)
  gen = None
  if gen_shape:
    gen = randomize(transformers.ElectraForMaskedLM(transformers.ElectraConfig(**gen_shape)),
                    seed + 1)
    with torch.no_grad():
      gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
  return disc, gen


def _diffs(net, model, vocab_size):
  from hf_twins import hf_outputs, hidden_diff, make_inputs, max_diff, our_outputs

  ids, mask, seg = make_inputs(vocab_size)
  their_logits, their_hidden = hf_outputs(model, ids, mask, seg)
  logits, hidden = our_outputs(net, ids, mask, seg)
  return max_diff(logits, their_logits, mask), hidden_diff(hidden, their_hidden, mask)


def test_tf1_discriminator_and_generator_match_hf_twins(tmp_path):
  from hf_twins import tf1_tensors, write_name_based_checkpoint

  from electra_tf.checkpoints.converter import load

  # H=128 -> 2 heads by the authors' rule; generator H=32 -> 1 head. E=64 != both.
  disc_shape = {"vocab_size": 180, "embedding_size": 64, "hidden_size": 128, "num_hidden_layers": 2,
                "num_attention_heads": 2, "intermediate_size": 256, "max_position_embeddings": 48}
  gen_shape = {**disc_shape, "hidden_size": 32, "num_attention_heads": 1,
               "intermediate_size": 128}
  disc, gen = _twins(disc_shape, gen_shape)
  tensors = tf1_tensors(disc, gen)
  assert "electra/encoder/layer_1/attention/self/query/kernel" in tensors
  assert "generator/embeddings_project/kernel" in tensors
  assert not any(k.startswith("generator/embeddings/") for k in tensors)  # shared
  slots = {f"{k}/adam_m": v for k, v in list(tensors.items())[:3]}
  write_name_based_checkpoint(str(tmp_path / "model.ckpt-10"),
                              {**tensors, **slots, "global_step": np.int64(10)})
  (tmp_path / "vocab.txt").write_text("\n".join(f"t{i}" for i in range(180)))
  loaded = load(str(tmp_path / "model.ckpt-10"))
  assert loaded.source == "tf1"
  assert loaded.config.model.num_heads == 2 and loaded.config.generator.num_heads == 1
  assert loaded.config.generator.hidden_size == 32
  assert loaded.config.generator.intermediate_size == 128
  assert loaded.config.model.max_position_embeddings == 48
  assert loaded.report.extra == 4  # three optimizer slots and global_step
  assert loaded.vocab_path == str(tmp_path / "vocab.txt")
  for net, model in ((loaded.discriminator, disc), (loaded.generator, gen)):
    logit_diff, hidden_diff = _diffs(net, model, 180)
    print(f"tf1 {net.name}: logits {logit_diff:.2e} hidden {hidden_diff:.2e}")
    assert logit_diff < TOL and hidden_diff < TOL


def test_tf1_heads_from_config_json_beside_it(tmp_path):
  """H=64 would give 1 head by the rule; config.json says 4, and 4 is what matches."""
  from hf_twins import tf1_tensors, write_name_based_checkpoint

  from electra_tf.checkpoints.converter import load

  shape = {"vocab_size": 90, "embedding_size": 64, "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 100, "max_position_embeddings": 32}
  disc, _ = _twins(shape, seed=3)
  write_name_based_checkpoint(str(tmp_path / "model.ckpt"), tf1_tensors(disc))
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\n')
  rule = load(str(tmp_path / "model.ckpt"))
  assert rule.config.model.num_heads == 1 and rule.generator is None
  assert _diffs(rule.discriminator, disc, 90)[1] > 1e-2  # wrong head count, wrong outputs
  explicit = load(str(tmp_path / "model.ckpt"), num_heads=4)
  assert max(_diffs(explicit.discriminator, disc, 90)) < TOL
  (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64,
                                                    "num_attention_heads": 4}))
  beside = load(str(tmp_path))  # a folder with a `checkpoint` file works too
  assert beside.config.model.num_heads == 4
  assert beside.discriminator.encoder.embeddings_project is None  # E == H
  assert max(_diffs(beside.discriminator, disc, 90)) < TOL


def test_tf1_bert_layout_and_mlm_baseline(tmp_path):
  """`bert/...` checkpoints read as a discriminator encoder; a checkpoint with a generator
  head but no discriminator (the authors' MLM baseline) reads its encoder as the generator."""
  import transformers
  from hf_twins import randomize, tf1_tensors, write_name_based_checkpoint

  from electra_tf.checkpoints.converter import load

  shape = {"vocab_size": 80, "embedding_size": 32, "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32}
  disc, _ = _twins(shape, seed=5)
  bert = {k.replace("electra/", "bert/"): v for k, v in tf1_tensors(disc).items()
          if k.startswith("electra/")}
  bert["bert/pooler/dense/kernel"] = np.zeros((32, 32), np.float32)
  write_name_based_checkpoint(str(tmp_path / "bert" / "bert_model.ckpt"), bert)
  loaded = load(str(tmp_path / "bert" / "bert_model.ckpt"), num_heads=2)
  assert loaded.report.initialized == ["discriminator head"] and loaded.report.extra == 1
  assert _diffs(loaded.discriminator, disc, 80)[1] < TOL

  gen = randomize(transformers.ElectraForMaskedLM(transformers.ElectraConfig(**shape)), 6)
  mlm = {k.replace("generator/", "electra/"): v for k, v in tf1_tensors(gen=gen).items()}
  write_name_based_checkpoint(str(tmp_path / "mlm" / "model.ckpt"), mlm)
  loaded = load(str(tmp_path / "mlm" / "model.ckpt"), num_heads=2)
  assert loaded.config.objective == "mlm" and loaded.discriminator is None
  assert max(_diffs(loaded.generator, gen, 80)) < TOL
