r"""SQuAD parity with the randomness taken out: our model and train step, fed the batches of
bench/finetune/finetune_transformers.py in its exact order and started from its exact QA head.

  python bench/finetune/squad_same_order.py --seed=0 --no_dropout
  python bench/finetune/squad_same_order.py --seed=0
  (compare: finetune_transformers.py --seed=0, with --no_dropout for the first)

finetune_transformers.py shuffles with numpy (`--seed`) and initialises its QA head with torch's
generator seeded the same way; this script rebuilds both, so the two runs differ only in the
implementation (and, with dropout on, in the dropout masks). Everything else is finetune.py's:
the MiniLM import, ElectraSpanQA, AdamW with bias correction (as torch), warmup + linear decay,
clipping, Keras fit in mixed bfloat16. Scored with the same post-processing and official script
as the transformers run. Prints a result line and one JSON line.

One source of randomness at a time can be put back to finetune.py's: `--order=ours` (the
tf.data shuffle of run_finetuning, seeded with --seed) and `--head=ours` (the QA head as
our Keras initializer draws it: truncated normal, spread 0.0176), or `--head=normal` (a
fresh numpy normal(0, 0.02) draw, the distribution torch uses, but not torch's values).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--max_train_examples", type=int, default=3000)
  parser.add_argument("--max_eval_examples", type=int, default=1000)
  parser.add_argument("--max_seq_length", type=int, default=256)
  parser.add_argument("--doc_stride", type=int, default=128)
  parser.add_argument("--max_query_length", type=int, default=64)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=1e-4)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--no_dropout", action="store_true",
                      help="dropout 0 everywhere (pass the same to the transformers run)")
  parser.add_argument("--order", choices=("reference", "ours"), default="reference",
                      help="ours: finetune.py's batch order (tf.data shuffle with --seed)")
  parser.add_argument("--head", choices=("reference", "ours", "normal"), default="reference",
                      help="ours: the QA head as finetune.py draws it (Keras init); normal: a "
                           "fresh numpy normal(0, 0.02) draw, as torch's init")
  args = parser.parse_args()

  import finetune_transformers as ref
  import tensorflow as tf
  import tf_keras
  import torch
  import transformers

  from electra_tf.checkpoints import converter
  from electra_tf.config import FinetuneConfig
  from electra_tf.data import builtin
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task
  from electra_tf.tasks import squad_data, squad_postprocess
  from electra_tf.training.finetuning import make_optimizer

  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  tf_keras.utils.set_random_seed(args.seed)
  torch.manual_seed(args.seed)  # as finetune_transformers.main, before the model is built
  reference = transformers.BertForQuestionAnswering.from_pretrained(ref.minilm_dir())
  tokenizer = transformers.BertTokenizerFast(os.path.join(ref.minilm_dir(), "vocab.txt"),
                                             do_lower_case=True)
  train_ex, _ = squad_data.read_squad(builtin.squad_path("train"), is_training=True)
  dev_ex, _ = squad_data.read_squad(builtin.squad_path("dev"), is_training=False)
  train_ex, dev_ex = train_ex[:args.max_train_examples], dev_ex[:args.max_eval_examples]
  source = converter.read_source(ref.minilm_dir())
  enc, starts, ends = ref.squad_features(tokenizer, train_ex, args, training=True)
  arrays = {"input_ids": enc["input_ids"], "input_mask": enc["attention_mask"],
            "segment_ids": enc["token_type_ids"], "start_positions": starts,
            "end_positions": ends}
  arrays = {k: np.asarray(v, np.int32) for k, v in arrays.items()}
  num_windows = len(arrays["start_positions"])
  if args.order == "ours":  # as run_finetuning: full-buffer shuffle, remainder dropped
    steps = max(1, round(num_windows / args.batch_size))
    dataset = (tf.data.Dataset.from_tensor_slices(arrays).shuffle(num_windows, seed=args.seed)
               .repeat().batch(args.batch_size, drop_remainder=True))
  else:
    steps = math.ceil(num_windows / args.batch_size)
    batches = ref.batch_indices(num_windows, args.batch_size, args.seed)
    order = np.concatenate([next(batches) for _ in range(steps)])
    dataset = tf.data.Dataset.from_tensor_slices({k: v[order] for k, v in arrays.items()}
                                                 ).batch(args.batch_size)

  encoder_config = source.config.model
  dropout = 0.0 if args.no_dropout else 0.1
  if args.no_dropout:
    encoder_config = dataclasses.replace(encoder_config, attention_dropout_rate=0.0)
  config = FinetuneConfig(task="squad_v1.1", max_seq_length=args.max_seq_length,
                          learning_rate=args.learning_rate, layerwise_lr_decay=1.0,
                          adam_bias_correction=True, dropout_rate=dropout, num_train_epochs=1)
  model = build_finetune_model(model_for_task(config, encoder_config))
  converter.restore_into(source, discriminator=model.encoder)
  if args.head == "reference":
    model.head.start_end.kernel.assign(reference.qa_outputs.weight.detach().numpy().T)
    model.head.start_end.bias.assign(reference.qa_outputs.bias.detach().numpy())
  elif args.head == "normal":
    rng = np.random.default_rng(args.seed)
    model.head.start_end.kernel.assign(rng.normal(0.0, 0.02, model.head.start_end.kernel.shape))
  kernel = model.head.start_end.kernel.numpy()
  print(f"{num_windows} windows, {steps} steps; QA head kernel std {kernel.std():.4f}",
        flush=True)
  model.compile(optimizer=make_optimizer(config, steps, encoder_config.num_layers))
  model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=2)

  dev, _, _ = ref.squad_features(tokenizer, dev_ex, args, training=False)
  start_logits, end_logits = [], []
  for i in range(0, len(dev["input_ids"]), 64):
    out = model({"input_ids": np.asarray(dev["input_ids"][i:i + 64], np.int32),
                 "input_mask": np.asarray(dev["attention_mask"][i:i + 64], np.int32),
                 "segment_ids": np.asarray(dev["token_type_ids"][i:i + 64], np.int32)},
                training=False)
    start_logits.append(out["start_logits"].numpy())
    end_logits.append(out["end_logits"].numpy())
  preds = ref.squad_predictions(dev_ex, dev, np.concatenate(start_logits),
                                np.concatenate(end_logits))
  scores = squad_postprocess.evaluate(builtin.squad_path("dev"), preds, version_2=False,
                                      qas_ids=[e.qas_id for e in dev_ex])
  print(f"ours, order {args.order}, head {args.head} "
        f"(seed {args.seed}, dropout {dropout}): em {scores['exact_match']:.2f}, "
        f"f1 {scores['f1']:.2f}")
  print(json.dumps({"impl": "ours_same_order", "em": scores["exact_match"], "f1": scores["f1"],
                    "dropout": dropout, **{k: v for k, v in vars(args).items()
                                           if k != "no_dropout"}}))


if __name__ == "__main__":
  main()
