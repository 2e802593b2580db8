r"""Our MLM network beside Model Garden's BERT, trained by one loop on the ablation study's data.

  python bench/quality/mlm_reference.py --steps=1500                 # Model Garden's network
  python bench/quality/mlm_reference.py --steps=1500 --network=ours  # electra_tf's Generator
  python bench/quality/mlm_reference.py --data=chain --network=ours  # a task only word order solves

Both networks are the ablation study's miniature (128 wide, 2 layers, 2 heads, embeddings 64
wide, vocab learned from the built-in corpus, exact GELU, dropout 0.1) trained as a masked LM
on the same input stream (bench/quality/ablation.py's data and masking, batch 32 x 128 unless
--batch_size says otherwise) by the same plain loop: one tf.function step, electra_tf's AdamW
with bias correction, weight decay 0.01, global-norm clipping at 1.0, and a linear warmup (10%)
then linear decay to 0. The reference is `official.nlp.modeling.networks.BertEncoderV2` with
`layers.MaskedLM` tied to its word embeddings. What differs is only the network's code, so the
loss curves say whether ours learns as a reference BERT does at this scale, and the attention
printed at the end (bench/quality/probe_encoder.py's statistics on TREC questions) says
whether either has learned to look at neighbouring tokens.

--data=chain swaps the text for synthetic sequences that only attention to neighbours can
predict (see chain_dataset), to measure how many steps a configuration needs before it
learns word order at all; --config_overrides changes the miniature as pretrain.py's flag
does (sequence length, batch, widths, epsilon); --optimizer=keras_adam rules out ours.

Needs the study's data: run `python bench/quality/ablation.py --study=objectives` (or --quick) once,
or point --data_dir/--vocab elsewhere.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(os.path.dirname(HERE)), HERE]

import numpy as np  # noqa: E402


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--network", choices=("model_garden", "ours"), default="model_garden")
  parser.add_argument("--steps", type=int, default=1500)
  parser.add_argument("--learning_rate", type=float, default=1e-3)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--norm_first", action="store_true",
                      help="Model Garden's network with pre-LayerNorm blocks (not ELECTRA's "
                           "post-LayerNorm): whether the plateau belongs to post-LN")
  parser.add_argument("--data", choices=("study", "chain"), default="study",
                      help="study: the ablation study's text; chain: synthetic sequences "
                           "in which each token fixes the next (a random successor table "
                           "over the vocabulary), so a masked token is given by its "
                           "neighbours and by nothing a bag of words knows")
  parser.add_argument("--config_overrides", default=None,
                      help="JSON, as pretrain.py's (for example '{\"model.embedding_size\": "
                           "128}': no projection between embeddings and blocks); "
                           "max_seq_length must match --data_dir's data")
  parser.add_argument("--chain_tokens", type=int, default=256,
                      help="--data=chain: how many ids the cycle runs through (a sequence "
                           "of 126 then holds most of them, so which ids it holds says "
                           "little about where each goes)")
  parser.add_argument("--optimizer", choices=("ours", "keras_adam"), default="ours",
                      help="ours: electra_tf's AdamW; keras_adam: tf_keras's Adam (no "
                           "weight decay), to rule the optimizer out")
  parser.add_argument("--vocab", default=os.path.join(os.path.dirname(HERE), "results", "ablation",
                                                      "vocab.txt"))
  parser.add_argument("--data_dir", default="~/.cache/electra_tf/ablation/data")
  args = parser.parse_args()

  import study_lib  # noqa: PLC0415
  import tensorflow as tf  # noqa: PLC0415
  import tf_keras  # noqa: PLC0415
  from official.nlp.modeling import layers, networks  # noqa: PLC0415

  from electra_tf import features as F  # noqa: PLC0415
  from electra_tf.data import manifest as manifest_lib  # noqa: PLC0415
  from electra_tf.data.tokenizer import WordPieceTokenizer  # noqa: PLC0415
  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415
  from electra_tf.model.encoder import ElectraEncoder  # noqa: PLC0415
  from electra_tf.model.networks import Generator  # noqa: PLC0415
  from electra_tf.training import pretraining, strategy  # noqa: PLC0415
  from electra_tf.training.optimizer import create_optimizer  # noqa: PLC0415

  vocab = load_vocab(args.vocab)
  config = study_lib.base_config(False, vocab.size).replace(learning_rate=args.learning_rate,
                                                           batch_size=args.batch_size)
  config = study_lib.with_steps(config, args.steps)
  overrides = study_lib.parse_overrides(args.config_overrides)
  if overrides:
    config = config.replace(**overrides)
  if args.data == "chain":
    dataset = chain_dataset(config, vocab, args.seed, args.chain_tokens)
  else:
    manifest = manifest_lib.read_manifest(os.path.expanduser(args.data_dir))
    data = pretraining.TrainData(manifest.shard_paths, vocab, manifest.examples,
                                 manifest.tokens)
    dataset = pretraining.make_dataset(config, data, strategy.make_strategy("one_device"))
  model_config = config.model
  tf_keras.utils.set_random_seed(args.seed)
  init = tf_keras.initializers.TruncatedNormal(stddev=model_config.initializer_range)

  if args.network == "ours":
    network = Generator(model_config)

    def logits_of(features, training):
      return network({F.INPUT_IDS: features[F.MASKED_INPUT_IDS],
                      F.INPUT_MASK: features[F.INPUT_MASK],
                      F.SEGMENT_IDS: features[F.SEGMENT_IDS],
                      F.MASKED_LM_POSITIONS: features[F.MASKED_LM_POSITIONS]},
                     training=training)
  else:
    encoder = networks.BertEncoderV2(
        vocab_size=vocab.size, hidden_size=model_config.hidden_size,
        num_layers=model_config.num_layers, num_attention_heads=model_config.num_heads,
        inner_dim=model_config.intermediate_size, embedding_width=model_config.embedding_size,
        type_vocab_size=model_config.type_vocab_size,
        inner_activation=lambda x: tf.nn.gelu(x, approximate=False),
        output_dropout=model_config.dropout_rate,
        attention_dropout=model_config.attention_dropout_rate, initializer=init,
        norm_first=args.norm_first)
    encoder({"input_word_ids": tf.zeros([1, 8], tf.int32),
             "input_mask": tf.ones([1, 8], tf.int32),
             "input_type_ids": tf.zeros([1, 8], tf.int32)})
    head = layers.MaskedLM(embedding_table=encoder.get_embedding_table(),
                           activation=lambda x: tf.nn.gelu(x, approximate=False),
                           initializer=init)

    def logits_of(features, training):
      hidden = encoder({"input_word_ids": features[F.MASKED_INPUT_IDS],
                        "input_mask": features[F.INPUT_MASK],
                        "input_type_ids": features[F.SEGMENT_IDS]},
                       training=training)["sequence_output"]
      return head(hidden, masked_positions=features[F.MASKED_LM_POSITIONS])

  # At least one warmup step: a run of under 10 steps rounds its 10% warmup down to 0.
  warmup, total = float(max(config.warmup_steps, 1)), float(config.num_train_steps)

  class Schedule(tf_keras.optimizers.schedules.LearningRateSchedule):
    def __call__(self, step):
      step = tf.cast(step, tf.float32)
      return args.learning_rate * tf.minimum(step / warmup,
                                             tf.maximum(0.0, (total - step) / (total - warmup)))

  if args.optimizer == "keras_adam":
    optimizer = tf_keras.optimizers.Adam(Schedule(), epsilon=config.epsilon)
  else:
    optimizer = create_optimizer("adamw", Schedule(), weight_decay=config.weight_decay,
                                 epsilon=config.epsilon, bias_correction=True)
  iterator = iter(dataset)
  logits_of(next(iterator), False)  # build the variables
  if args.network == "ours":
    variables = network.trainable_variables
  else:  # the table appears in both: keep one copy (the pooler gets no gradient)
    unique = {v.ref(): v for v in encoder.trainable_variables + head.trainable_variables
              if "pooler" not in v.name}
    variables = list(unique.values())

  @tf.function
  def train_step(features):
    with tf.GradientTape() as tape:
      logits = logits_of(features, True)
      weights = features[F.MASKED_LM_WEIGHTS]
      targets = features[F.MASKED_LM_IDS]
      loss = (tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
                            * weights)
              / (tf.reduce_sum(weights) + 1e-6))
      correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), targets),
                        tf.float32)
      accuracy = tf.reduce_sum(correct * weights) / (tf.reduce_sum(weights) + 1e-6)
    grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), config.clip_norm)
    optimizer.apply_gradients(zip(grads, variables))
    return loss, accuracy

  print(f"{args.network} on {args.data}, {args.optimizer} optimizer: {args.steps} steps, "
        f"batch {config.batch_size} x {config.max_seq_length}, peak LR {args.learning_rate}, "
        f"seed {args.seed}" + (f", {args.config_overrides}" if args.config_overrides else ""))
  losses, accuracies, start = [], [], time.time()
  for step in range(1, args.steps + 1):
    loss, accuracy = train_step(next(iterator))
    losses.append(float(loss))
    accuracies.append(float(accuracy))
    if step % 100 == 0 or step == args.steps:
      print(f"step {step}: masked-LM loss {np.mean(losses[-100:]):.4f}, accuracy "
            f"{np.mean(accuracies[-100:]):.4f} (mean of the last 100 steps), "
            f"{time.time() - start:.0f}s", flush=True)

  # The attention of the trained encoder, through our encoder class (same block, same weights).
  if args.data == "chain":
    chains = next(iter(dataset))
    sample = {k: chains[k] for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}
    where = f"{config.batch_size} chains"
  else:
    _, train, _ = study_lib.load_task(study_lib.TASKS["trec"],
                                              WordPieceTokenizer(vocab))
    sample = {k: tf.constant(train[k][:512])
              for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}
    where = "512 TREC questions"
  if args.network == "ours":
    probed = network.encoder
  else:
    probed = ElectraEncoder(model_config, name="encoder")
    probed(sample)
    probed.embeddings.word_embeddings.assign(encoder.get_embedding_table())
    probed.embeddings.position_embeddings.assign(
        encoder._position_embedding_layer._position_embeddings)  # noqa: SLF001
    probed.embeddings.token_type_embeddings.assign(
        encoder._type_embedding_layer.embeddings)  # noqa: SLF001
    probed.embeddings.layer_norm.set_weights(encoder._embedding_norm_layer.get_weights())  # noqa: SLF001
    if probed.embeddings_project is not None:
      probed.embeddings_project.set_weights(encoder._embedding_projection.get_weights())  # noqa: SLF001

    def by_name(block):
      return sorted(block.weights, key=lambda v: v.name.split("/layer_")[-1].split("/", 1)[-1])

    for theirs, mine in zip(encoder._transformer_layers, probed.blocks, strict=True):  # noqa: SLF001
      for source, target in zip(by_name(theirs), by_name(mine), strict=True):
        target.assign(source)
  print(f"attention on {where} (mean over real query tokens):")
  print("  layer head  entropy  self  prev  next   cls   sep")
  for row in study_lib.attention_stats(probed, sample):
    print(f"  {row['layer']:>5} {row['head']:>4}  {row['entropy']:7.2f} {row['self']:5.2f} "
          f"{row['prev']:5.2f} {row['next']:5.2f} {row['cls']:5.2f} {row['sep']:5.2f}")


def chain_dataset(config, vocab, seed: int, tokens: int):
  """Masked batches of synthetic chains: token i+1 = successor[token i], from a random start.

  The successor table is a random cycle through `tokens` of the vocabulary's ordinary ids,
  so every masked token is determined by either neighbour: a model that has learned to
  attend to neighbours predicts it; one that sees only which ids the sequence holds does
  not. Masked by the study's own masking (pipeline.mask_fn).
  """
  import tensorflow as tf  # noqa: PLC0415

  from electra_tf import features as F  # noqa: PLC0415
  from electra_tf.data import pipeline  # noqa: PLC0415

  rng = np.random.default_rng(seed)
  ordinary = np.array(sorted(set(range(vocab.size)) - set(vocab.unmaskable_ids)
                             - {vocab.pad_id}), np.int64)
  cycle = rng.permutation(ordinary)[:tokens]
  successor = np.zeros(vocab.size, np.int64)
  successor[cycle] = np.roll(cycle, -1)
  batch, length = config.batch_size, config.max_seq_length

  def batches():
    while True:
      ids = np.empty([batch, length - 2], np.int64)
      ids[:, 0] = rng.choice(cycle, batch)
      for i in range(1, length - 2):
        ids[:, i] = successor[ids[:, i - 1]]
      cls = np.full([batch, 1], vocab.cls_id)
      sep = np.full([batch, 1], vocab.sep_id)
      yield {F.INPUT_IDS: np.concatenate([cls, ids, sep], 1).astype(np.int32),
             F.INPUT_MASK: np.ones([batch, length], np.int32),
             F.SEGMENT_IDS: np.zeros([batch, length], np.int32)}

  spec = {k: tf.TensorSpec([batch, length], tf.int32)
          for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}
  masker = pipeline.mask_fn(vocab, config.max_predictions_per_seq, config.mask_prob,
                            config.mask_token_rate, config.random_token_rate, seed=seed)
  return (tf.data.Dataset.from_generator(batches, output_signature=spec)
          .map(masker).prefetch(tf.data.AUTOTUNE))


if __name__ == "__main__":
  main()
