r"""What a pretrained encoder has learned, before any fine-tuning: attention and linear probes.

  python bench/quality/probe_encoder.py --vocab=bench/results/ablation/vocab.txt \
      --encoders=random,~/.cache/electra_tf/ablation/objectives/electra/discriminator \
      --task=trec

For each encoder (a checkpoint the convert command reads, or `random` for the initialisation
the study's no-pretraining row fine-tunes from) on the task's training sentences:

- Attention, per layer and head, averaged over real query tokens: the entropy of the
  attention distribution (nats; uniform attention over a sentence of n tokens is log n), and
  the attention mass on the token itself, the previous and the next token, [CLS] and the
  final [SEP]. Pretrained encoders grow heads that look at neighbours (local word order);
  an encoder whose heads stay near uniform, or only point at [CLS]/[SEP], has learned at
  most a bag of words.
- Linear probes: logistic regression on frozen features (the mean over real tokens of the
  embedding output and of each layer's output, and the last layer's [CLS] vector), trained
  on the task's training split and scored on its dev split. Features better than a random
  encoder's are what pretraining is for; fine-tuning starts from them.

The encoder's sizes come from --hidden_size etc. (the ablation study's miniature by default).
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(os.path.dirname(HERE)), HERE]

import numpy as np  # noqa: E402


def features_of(encoder, data: dict, batch: int = 512) -> np.ndarray:
  """[N, num_layers + 2, H]: mean-pooled embedding and layer outputs, then the [CLS] vector."""
  import tensorflow as tf  # noqa: PLC0415

  from electra_tf import features as F  # noqa: PLC0415

  out = []
  for start in range(0, len(data[F.INPUT_IDS]), batch):
    inputs = {k: tf.constant(data[k][start:start + batch])
              for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}
    last, hidden = encoder(inputs, training=False, output_hidden_states=True)
    real = tf.cast(inputs[F.INPUT_MASK], tf.float32)[..., tf.newaxis]
    pooled = [tf.reduce_sum(h * real, 1) / tf.reduce_sum(real, 1) for h in hidden]
    out.append(tf.stack([*pooled, last[:, 0]], 1).numpy())
  return np.concatenate(out)


def spread(vectors: np.ndarray) -> float:
  """How much [N, H] vectors differ between examples: mean per-dimension std / RMS."""
  return float(vectors.std(axis=0).mean() / np.sqrt((vectors ** 2).mean()))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--encoders", required=True,
                      help="comma-separated checkpoints (or `random`) to probe")
  parser.add_argument("--vocab", required=True, help="the vocab the encoders were trained with")
  parser.add_argument("--task", default="trec", choices=("trec", "movie_reviews"))
  parser.add_argument("--hidden_size", type=int, default=128)
  parser.add_argument("--num_layers", type=int, default=2)
  parser.add_argument("--num_heads", type=int, default=2)
  parser.add_argument("--intermediate_size", type=int, default=512)
  parser.add_argument("--embedding_size", type=int, default=64)
  parser.add_argument("--seed", type=int, default=0, help="the random encoder's seed")
  args = parser.parse_args()

  import study_lib  # noqa: PLC0415
  import tensorflow as tf  # noqa: PLC0415
  from sklearn.linear_model import LogisticRegression  # noqa: PLC0415

  from electra_tf import features as F  # noqa: PLC0415
  from electra_tf.config import EncoderConfig  # noqa: PLC0415
  from electra_tf.data.tokenizer import WordPieceTokenizer  # noqa: PLC0415
  from electra_tf.data.vocab import load_vocab  # noqa: PLC0415
  from electra_tf.model.encoder import ElectraEncoder  # noqa: PLC0415
  from electra_tf.model.finetune_models import LABEL  # noqa: PLC0415

  vocab = load_vocab(args.vocab)
  config = EncoderConfig(vocab_size=vocab.size, hidden_size=args.hidden_size,
                         num_layers=args.num_layers, num_heads=args.num_heads,
                         intermediate_size=args.intermediate_size,
                         embedding_size=args.embedding_size)
  setting = study_lib.TASKS[args.task]
  _, train, dev = study_lib.load_task(setting, WordPieceTokenizer(vocab))
  sample = {k: tf.constant(train[k][:512]) for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}
  names = ["embeddings", *(f"layer {i}" for i in range(args.num_layers)), "last [CLS]"]
  for source in args.encoders.split(","):
    path = None if source == "random" else os.path.expanduser(source)
    weights = study_lib.encoder_weights(config, path, args.seed)
    encoder = ElectraEncoder(config, name="encoder")
    encoder(sample)
    encoder.set_weights(weights)
    print(f"\n== {source}")
    print("attention (mean over real query tokens, first 512 training sentences):")
    print("  layer head  entropy  self  prev  next   cls   sep")
    for row in study_lib.attention_stats(encoder, sample):
      print(f"  {row['layer']:>5} {row['head']:>4}  {row['entropy']:7.2f} {row['self']:5.2f} "
            f"{row['prev']:5.2f} {row['next']:5.2f} {row['cls']:5.2f} {row['sep']:5.2f}")
    train_x, dev_x = features_of(encoder, train), features_of(encoder, dev)
    scores = []
    for i, name in enumerate(names):
      probe = LogisticRegression(max_iter=2000).fit(train_x[:, i], train[LABEL])
      scores.append(f"{name} {probe.score(dev_x[:, i], dev[LABEL]):.3f}")
    print(f"linear probes on frozen features, {args.task} dev accuracy: " + ", ".join(scores))
    print("spread across dev sentences (per-dimension std over RMS; 0: the same vector for "
          "every sentence): " + ", ".join(f"{name} {spread(dev_x[:, i]):.3f}"
                                          for i, name in enumerate(names)))


if __name__ == "__main__":
  main()
