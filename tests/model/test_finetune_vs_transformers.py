"""A SQuAD fine-tuning run step by step against transformers: the same BERT weights, head,
batches, learning-rate schedule and bias-corrected AdamW give the same losses and weights.

This pins the whole train step (encoder, span loss with padding masked, global-norm clipping,
AdamW with decoupled decay off LayerNorm/biases, warmup + linear decay), so the SQuAD parity
benchmark's remaining differences can only come from data order, dropout and initialisation.
"""

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SHAPE = {"vocab_size": 50, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "max_position_embeddings": 32, "hidden_dropout_prob": 0.0,
         "attention_probs_dropout_prob": 0.0}
STEPS, BATCH, SEQ = 8, 4, 16


def _batches(seed=0):
  from electra_tf import features as F
  from electra_tf.model.finetune_models import END_POSITIONS, START_POSITIONS

  rng = np.random.default_rng(seed)
  out = []
  for _ in range(STEPS):
    lengths = rng.integers(6, SEQ + 1, size=BATCH)
    mask = (np.arange(SEQ)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(1, SHAPE["vocab_size"], size=(BATCH, SEQ)).astype(np.int32) * mask
    segments = ((np.arange(SEQ)[None] >= 3) * mask).astype(np.int32)
    starts = rng.integers(3, lengths - 1).astype(np.int32)
    ends = np.minimum(starts + rng.integers(0, 3, size=BATCH), lengths - 1).astype(np.int32)
    out.append({F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: segments,
                START_POSITIONS: starts, END_POSITIONS: ends})
  return out


def _transformers_losses(model, batches, learning_rate, warmup):
  """The reference loop of bench/finetune/finetune_transformers.py, padding masked out of the
  loss."""
  no_decay = ("bias", "LayerNorm.weight")
  groups = [{"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
             "weight_decay": 0.01},
            {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)],
             "weight_decay": 0.0}]
  optimizer = torch.optim.AdamW(groups, lr=learning_rate, eps=1e-6)
  schedule = torch.optim.lr_scheduler.LambdaLR(
      optimizer, lambda s: min(1.0, s / warmup) * max(0.0, (STEPS - s) / STEPS))
  model.train()
  losses = []
  for b in batches:
    mask = torch.tensor(b["input_mask"]).float()
    out = model(input_ids=torch.tensor(b["input_ids"]).long(), attention_mask=mask.long(),
                token_type_ids=torch.tensor(b["segment_ids"]).long())
    ce = torch.nn.functional.cross_entropy
    loss = 0.5 * (ce(out.start_logits - 1e4 * (1 - mask), torch.tensor(b["start_positions"]).long())
                  + ce(out.end_logits - 1e4 * (1 - mask), torch.tensor(b["end_positions"]).long()))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
    losses.append(loss.item())
  return losses


def test_squad_train_steps_match_transformers(tmp_path):
  import tensorflow as tf

  from electra_tf.checkpoints import converter
  from electra_tf.config import FinetuneConfig
  from electra_tf.model.finetune_models import ElectraSpanQA
  from electra_tf.training.finetuning import make_optimizer

  torch.manual_seed(3)  # weights ~N(0, 0.1): logits of order 1, so mismatches show
  reference = transformers.BertForQuestionAnswering(
      transformers.BertConfig(initializer_range=0.1, **SHAPE))
  reference.save_pretrained(tmp_path)
  source = converter.read_source(str(tmp_path))
  config = FinetuneConfig(task="squad_v1.1", max_seq_length=SEQ, max_query_length=4,
                          learning_rate=3e-3,
                          layerwise_lr_decay=1.0, adam_bias_correction=True,
                          warmup_fraction=0.25)
  batches = _batches()
  with tf.device("/cpu:0"):
    model = ElectraSpanQA(dataclasses.replace(source.config.model, dropout_rate=0.0))
    model(batches[0])
    converter.restore_into(source, discriminator=model.encoder)
    # The same head on both sides (transformers' qa_outputs).
    model.head.start_end.kernel.assign(reference.qa_outputs.weight.detach().numpy().T)
    model.head.start_end.bias.assign(reference.qa_outputs.bias.detach().numpy())
    model.compile(optimizer=make_optimizer(config, STEPS, SHAPE["num_hidden_layers"]))
    step = tf.function(model.train_step)
    ours = []
    for b in batches:
      model.reset_metrics()
      ours.append(float(step(b)["loss"]))

  theirs = _transformers_losses(reference, batches, config.learning_rate, int(0.25 * STEPS))
  print("ours  ", np.round(ours, 5), "\ntheirs", np.round(theirs, 5))
  np.testing.assert_allclose(ours, theirs, rtol=2e-4)
  assert theirs[-1] < theirs[0] - 0.2  # the run learns, so the later steps test the updates
  ours_words = model.encoder.embeddings.word_embeddings.numpy()
  their_words = reference.bert.embeddings.word_embeddings.weight.detach().numpy()
  np.testing.assert_allclose(ours_words, their_words, atol=2e-5)
  np.testing.assert_allclose(model.head.start_end.kernel.numpy(),
                             reference.qa_outputs.weight.detach().numpy().T, atol=2e-5)
