r"""The reference side of the tagging parity check: the all-MiniLM-L6-v2 weights fine-tuned as
`BertForTokenClassification` with transformers (PyTorch) on the same sentences, word pieces
and windows as `finetune.py --task=hironsan_ner` (or `wnut16_ner`), scored by the seqeval
package.

  python bench/finetune/tagging_transformers.py --task=hironsan_ner --seed=0

The word pieces come from transformers' own BERT tokenizer (each word alone, as
finetune.py does it); the windows and the labels on first pieces from
electra_tf.tasks.tagging_features, so that only the model, its loss and its training loop
differ from ours. Prints progress, a result line and one JSON line. Needs
requirements-test.txt (torch, transformers, seqeval).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from finetune_transformers import minilm_dir, optimizer_and_schedule  # noqa: E402


def hf_pieces(tokenizer, sentences) -> list[list[list[int]]]:
  """Piece ids of each word tokenized alone; a word without pieces becomes [UNK]."""
  out = []
  for sentence in sentences:
    ids = tokenizer(list(sentence.words), add_special_tokens=False)["input_ids"]
    out.append([p or [tokenizer.unk_token_id] for p in ids])
  return out


def our_pieces(sentences) -> list[list[list[int]]]:
  """The pieces finetune.py gives the same words (electra_tf's tokenizer)."""
  from electra_tf import presets
  from electra_tf.tasks import runner
  from electra_tf.tasks.tagging_features import word_pieces

  tokenizer, _ = runner.make_tokenizer(os.path.join(minilm_dir(), "vocab.txt"), None,
                                       presets.get("tiny").model)
  return word_pieces([s.words for s in sentences], tokenizer)


def windows_of(tokenizer, sentences, labels, args):
  from electra_tf.tasks.tagging_features import encode_windows

  index = {name: i for i, name in enumerate(labels)}
  pieces = our_pieces(sentences) if args.pieces == "ours" else hf_pieces(tokenizer, sentences)
  return encode_windows(pieces,
                        [[index[t] for t in s.tags] for s in sentences], args.max_seq_length,
                        args.doc_stride, tokenizer.cls_token_id, tokenizer.sep_token_id,
                        tokenizer.pad_token_id)


def train(model, arrays, steps, args):
  import torch

  optimizer, schedule = optimizer_and_schedule(model, steps, args)
  rng = np.random.default_rng(args.seed)
  n = len(arrays["input_ids"])
  order = []
  model.train()
  begin = time.time()
  for step in range(1, steps + 1):
    if len(order) < args.batch_size:  # a fresh permutation per pass, remainder dropped
      order = list(rng.permutation(n))
    idx, order = order[:args.batch_size], order[args.batch_size:]
    batch = {k: torch.tensor(v[idx], dtype=torch.long) for k, v in arrays.items()}
    loss = model(**batch).loss  # mean over the labelled tokens (labels -100 elsewhere)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()
    if step % args.log_steps == 0 or step == steps:
      rate = step / (time.time() - begin)
      print(f"step {step}/{steps} | loss {loss.item():.4f} | ETA {(steps - step) / rate:.0f}s",
            flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--task", choices=["hironsan_ner", "wnut16_ner"], default="hironsan_ner")
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--doc_stride", type=int, default=None, help="default: half a window")
  parser.add_argument("--epochs", type=int, default=3)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--learning_rate", type=float, default=1e-4)
  parser.add_argument("--warmup_fraction", type=float, default=0.1)
  parser.add_argument("--weight_decay", type=float, default=0.01)
  parser.add_argument("--pieces", choices=["transformers", "ours"], default="transformers",
                      help="whose tokenizer splits the words: transformers' BERT tokenizer, or "
                           "electra_tf's (to feed both models the same ids)")
  parser.add_argument("--max_train_examples", type=int, default=None,
                      help="the first N training sentences, as finetune.py's flag")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--log_steps", type=int, default=10)
  args = parser.parse_args()
  args.doc_stride = args.doc_stride or (args.max_seq_length - 2) // 2

  import torch
  import transformers
  from seqeval import metrics as seqeval_metrics

  from electra_tf.tasks import tagging_corpora, tagging_data

  torch.manual_seed(args.seed)
  torch.set_num_threads(args.threads)
  begin = time.time()
  _, train_sentences, dev_sentences = tagging_corpora.load(args.task)
  labels = tagging_data.label_list(train_sentences)  # of all, as finetune.py's make_spec
  train_sentences = train_sentences[:args.max_train_examples]
  tokenizer = transformers.BertTokenizerFast(os.path.join(minilm_dir(), "vocab.txt"),
                                             do_lower_case=True)
  train_windows = windows_of(tokenizer, train_sentences, labels, args)
  features = train_windows.features
  arrays = {"input_ids": features["input_ids"], "attention_mask": features["input_mask"],
            "token_type_ids": features["segment_ids"],
            "labels": np.where(features["label_weights"] > 0, features["label_ids"], -100)}
  # finetune.py's step count: whole epochs of round(epochs * windows / batch) steps.
  steps = max(1, round(args.epochs * len(train_windows) / args.batch_size) // args.epochs)
  steps *= args.epochs
  print(f"{len(train_sentences)} sentences -> {len(train_windows)} windows, {steps} steps",
        flush=True)
  model = transformers.BertForTokenClassification.from_pretrained(minilm_dir(),
                                                                  num_labels=len(labels))
  train(model, arrays, steps, args)
  model.eval()
  dev_windows = windows_of(tokenizer, dev_sentences, labels, args)
  dev = dev_windows.features
  logits = []
  with torch.no_grad():
    for i in range(0, len(dev_windows), 64):
      out = model(**{name: torch.tensor(dev[key][i:i + 64], dtype=torch.long)
                     for name, key in (("input_ids", "input_ids"),
                                       ("attention_mask", "input_mask"),
                                       ("token_type_ids", "segment_ids"))})
      logits.append(out.logits.float().numpy())
  predicted = [[labels[i] for i in s]
               for s in dev_windows.gather(np.argmax(np.concatenate(logits), -1))]
  true = [list(s.tags) for s in dev_sentences]
  result = {"f1": 100 * seqeval_metrics.f1_score(true, predicted),
            "accuracy": 100 * seqeval_metrics.accuracy_score(true, predicted),
            "train_sentences": len(train_sentences), "dev_sentences": len(dev_sentences),
            "impl": "transformers", "seconds": round(time.time() - begin), **vars(args)}
  print(f"transformers {args.task}: entity F1 {result['f1']:.2f}, token accuracy "
        f"{result['accuracy']:.2f} ({result['seconds']} s)")
  print(json.dumps(result))


if __name__ == "__main__":
  main()
