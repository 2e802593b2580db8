r"""Which deployment of a fine-tuned model serves raw text fastest on this CPU: our SavedModel
with its raw-text signatures, transformers' PyTorch model with its fast tokenizer, or ONNX
Runtime on our ONNX export with a Hugging Face tokenizer. Text in, the task's answer out.

  python bench/serving/serving.py [--rounds=5] [--threads=2] [--keep_dir=DIR]
      [--sides=ours,transformers,onnxruntime] [--ours_variant=NAME=VERSION_DIR[,VERSION_DIR] ...]
  python bench/serving/serving.py --quick      (1 round on few inputs: checks that it runs)

Models, the same weights on every side: all-MiniLM-L6-v2 (requirements-data.txt) as a 2-class
sentence classifier (our ClassificationHead, max_seq_length 128) and a SQuAD v1.1 model
(max_seq_length 384, doc_stride 128, max_query_length 64), heads random with seed 0. Each is
saved as a fine-tuning run and exported as our SavedModel and ONNX model (--keep_dir: once);
transformers loads the MiniLM folder and gets our heads (BertModel + Linear on the [CLS] state;
BertForQuestionAnswering). Sides, one persistent worker process each with --threads intra-op
threads (inter-op 1 for TF and ONNX Runtime; RAYON_NUM_THREADS for the fast tokenizers):
  ours          tf.saved_model.load: classify_text(text), answer(question, context); tokenized
                and padded in the graph as the export does.
  transformers  AutoTokenizer (fast) of the MiniLM folder + torch under inference_mode.
  onnxruntime   our ONNX model + AutoTokenizer of its export folder; int32 inputs.
  NAME          each --ours_variant NAME=DIR[,DIR] (SavedModel version dirs, e.g. bfloat16
                export), run like ours on the workloads of the signatures it has.
transformers and onnxruntime share their code: padding="longest", softmax + argmax, and for
SQuAD the best start + end logit over the context tokens of all windows of an example
(end >= start, at most 30 tokens). Ours keeps only the top 20 starts and ends of a window (as
finetune.py), and its doc_stride is the step between windows where transformers' stride is
their overlap: on flat (untrained) logits and on long contexts the answers can differ.

Workloads: "short" = movie-review dev sentences, "long" = SQuAD v1.1 dev question + context
pairs, at batch 1 and 32; "ids BxL" = each side's model alone on fixed int32 ids (ours:
serving_default; the classifier at 128, the SQuAD model at 384). Every side first runs one
chunk of every workload untimed; then in each of --rounds rounds every side runs the same chunk
(same inputs) of every workload, the side order rotated by one each round. A call is timed in
its worker, text in to labels or answer strings out. Reports p50 and p99 ms per call (p99 is
about the slowest of few calls), sequences/s (items / timed seconds), "ours / fastest" (an ours
or variant row's time per sequence over the fastest of transformers and onnxruntime) and
agreement with ours (else the first side): equal classes and the largest probability
difference, equal answer strings, or the largest difference of the first row's logits on ids.
Prints the CPU, its bf16 flags, load averages, commit, command, a markdown table and one JSON
line per row.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np
from serving_lib import machine, minilm_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE_SIDES = ("ours", "transformers", "onnxruntime")
LABELS = ("negative", "positive")
CLS_LENGTH, SQUAD_LENGTH, DOC_STRIDE, MAX_ANSWER_TOKENS = 128, 384, 128, 30
# name: (task, batch size, sequence length of ids, calls per round, calls per round in --quick)
WORKLOADS = {
  "short b1": ("classify", 1, None, 32, 4), "short b32": ("classify", 32, None, 2, 1),
  "long b1": ("answer", 1, None, 8, 2), "long b32": ("answer", 32, None, 1, 1),
  "ids 1x128": ("ids_cls", 1, 128, 16, 2), "ids 32x128": ("ids_cls", 32, 128, 2, 1),
  "ids 1x384": ("ids_squad", 1, 384, 4, 1), "ids 8x384": ("ids_squad", 8, 384, 1, 1)}


# ---- artifacts (a child process, so the parent stays free of TF) -------------------------

def build(root: str) -> None:
  """Writes both runs, their SavedModels and ONNX exports, the head weights, the inputs."""
  import dataclasses

  import tf_keras

  from electra_tf.checkpoints import converter
  from electra_tf.config import FinetuneConfig
  from electra_tf.data import builtin
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task
  from electra_tf.serving import onnx_export, saved_model, sources
  from electra_tf.tasks import classification_data, squad_data
  from electra_tf.training.finetuned import save_finetuned

  tf_keras.utils.set_random_seed(0)
  source = converter.read_source(minilm_dir())
  manifest, heads = {}, {}
  for name, task, length in (("cls", "classification", CLS_LENGTH),
                             ("squad", "squad_v1.1", SQUAD_LENGTH)):
    config = FinetuneConfig(task=task, max_seq_length=length, doc_stride=DOC_STRIDE,
                            max_query_length=64, max_answer_length=MAX_ANSWER_TOKENS)
    model = build_finetune_model(model_for_task(config, source.config.model, 2))
    converter.restore_into(source, discriminator=model.encoder)
    record = {"task": task, "encoder": source.config.model.to_dict(),
              "finetune": config.to_dict()}
    if name == "cls":
      record["spec"] = dataclasses.asdict(classification_data.MOVIE_REVIEWS)
    dense = model.head.dense if name == "cls" else model.head.start_end
    heads[f"{name}_kernel"], heads[f"{name}_bias"] = dense.kernel.numpy(), dense.bias.numpy()
    run = os.path.join(root, f"{name}_run")
    save_finetuned(model, record, source.vocab_path, os.path.join(run, "best"))
    manifest[f"ours_{name}"] = saved_model.export(run, None, os.path.join(root, f"ours_{name}"))
    manifest[f"onnx_{name}"] = os.path.join(root, f"onnx_{name}")
    onnx_export.export(sources.load_task(run, "onnx"), manifest[f"onnx_{name}"])
  np.savez(os.path.join(root, "heads.npz"), **heads)
  examples, _ = squad_data.read_squad(builtin.squad_path("dev"), is_training=False)
  random.Random(0).shuffle(examples)
  inputs = {"short": [e.texts[0] for e in classification_data.movie_reviews(seed=0)[2]],
            "long": [[e.question, e.context] for e in examples[:1000]]}
  with open(os.path.join(root, "inputs.json"), "w") as f:
    json.dump(inputs, f)
  with open(os.path.join(root, "manifest.json"), "w") as f:  # last: marks the folder complete
    json.dump(manifest, f)


# ---- workers: one side each, answering chunks of work on stdin -------------------------

def ids_feed(size: list[int]) -> dict[str, np.ndarray]:
  batch, seq = size
  ids = np.random.default_rng(batch * 1000 + seq).integers(1000, 30000, (batch, seq), np.int32)
  ids[:, 0], ids[:, -1] = 101, 102
  return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def ours_tasks(paths: list[str], threads: int) -> dict:
  """{task: (prepare, run)} of the SavedModels at `paths` (by the signatures they have)."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  registers the ops of the text signatures

  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  tasks, loaded = {}, []

  def ids_run(fn, output):
    return lambda feed: tf.cast(fn(**{k: tf.constant(v) for k, v in feed.items()})[output][0],
                                tf.float32).numpy()  # float32 also from a bfloat16 export

  for path in paths:
    loaded.append(tf.saved_model.load(path))  # the signatures need the object kept alive
    sigs = loaded[-1].signatures
    if "classify_text" in sigs:
      fn = sigs["classify_text"]

      def classify(texts, fn=fn):
        out = fn(text=tf.constant(texts))
        return {"class": out["class_ids"].numpy().tolist(),
                "prob": tf.cast(out["probabilities"], tf.float32).numpy().tolist(),
                "label": [label.decode() for label in out["labels"].numpy()]}

      tasks["classify"] = (list, classify)
      tasks["ids_cls"] = (ids_feed, ids_run(sigs["serving_default"], "logits"))
    if "answer" in sigs:
      fn = sigs["answer"]
      tasks["answer"] = (list, lambda pairs, fn=fn: {"answer": [a.decode() for a in fn(
          question=tf.constant([p[0] for p in pairs]),
          context=tf.constant([p[1] for p in pairs]))["answer"].numpy()]})
      tasks["ids_squad"] = (ids_feed, ids_run(sigs["serving_default"], "start_logits"))
  tasks["_keep"] = loaded
  return tasks


def best_answers(enc, start: np.ndarray, end: np.ndarray, contexts: list[str]) -> list[str]:
  """The best span (start + end logit) over the context tokens of each example's windows."""
  length = start.shape[1]
  upper = np.triu(np.ones((length, length), bool))
  band = upper & ~np.triu(upper, MAX_ANSWER_TOKENS)  # end >= start, at most 30 tokens
  best = [(-np.inf, "")] * len(contexts)
  for w, example in enumerate(enc["overflow_to_sample_mapping"]):
    context = np.array([s == 1 for s in enc.sequence_ids(w)])
    scores = np.where(band & context[:, None] & context[None, :],
                      start[w][:, None] + end[w][None, :], -np.inf)
    i, j = np.unravel_index(np.argmax(scores), scores.shape)
    if scores[i, j] > best[example][0]:
      offsets = enc["offset_mapping"][w]
      best[example] = (scores[i, j], contexts[example][offsets[i][0]:offsets[j][1]])
  return [text for _, text in best]


def torch_models(manifest: dict, threads: int):
  """(tokenizers, classifier, span model) of transformers: the MiniLM folder, our heads."""
  import torch
  import transformers

  torch.set_num_threads(threads)
  heads = np.load(manifest["heads"])
  tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir(), use_fast=True)
  bert = transformers.BertModel.from_pretrained(minilm_dir(), add_pooling_layer=False).eval()
  linear = torch.nn.Linear(bert.config.hidden_size, 2)
  qa = transformers.BertForQuestionAnswering.from_pretrained(minilm_dir()).eval()
  with torch.no_grad():
    for layer, name in ((linear, "cls"), (qa.qa_outputs, "squad")):
      layer.weight.copy_(torch.from_numpy(heads[f"{name}_kernel"].T))
      layer.bias.copy_(torch.from_numpy(heads[f"{name}_bias"]))
  names = {"input_ids": "input_ids", "input_mask": "attention_mask",
           "segment_ids": "token_type_ids"}

  def classifier(feed):
    with torch.inference_mode():
      feed = {names[k]: torch.from_numpy(np.asarray(v, np.int64)) for k, v in feed.items()}
      return linear(bert(**feed).last_hidden_state[:, 0]).numpy()

  def span_model(feed):
    with torch.inference_mode():
      out = qa(**{names[k]: torch.from_numpy(np.asarray(v, np.int64)) for k, v in feed.items()})
      return out.start_logits.numpy(), out.end_logits.numpy()

  return {"cls": tokenizer, "squad": tokenizer}, classifier, span_model


def ort_models(manifest: dict, threads: int):
  """(tokenizers, classifier, span model) of ONNX Runtime on our exports and their tokenizers."""
  import onnxruntime as ort
  import transformers

  options = ort.SessionOptions()
  options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
  sessions = {name: ort.InferenceSession(os.path.join(manifest[f"onnx_{name}"], "model.onnx"),
                                         options, providers=["CPUExecutionProvider"])
              for name in ("cls", "squad")}
  tokenizers = {name: transformers.AutoTokenizer.from_pretrained(manifest[f"onnx_{name}"])
                for name in ("cls", "squad")}

  def run(name, outputs, feed):
    return sessions[name].run(outputs, {k: np.asarray(v, np.int32) for k, v in feed.items()})

  return (tokenizers, lambda feed: run("cls", ["logits"], feed)[0],
          lambda feed: tuple(run("squad", ["start_logits", "end_logits"], feed)))


def hf_tasks(tokenizers: dict, classifier, span_model) -> dict:
  """{task: (prepare, run)} of a Hugging Face fast tokenizer before a model."""
  assert all(t.is_fast for t in tokenizers.values()), tokenizers

  def ids_of(enc):
    return {"input_ids": enc["input_ids"], "input_mask": enc["attention_mask"],
            "segment_ids": enc["token_type_ids"]}

  def classify(texts):
    enc = tokenizers["cls"](texts, padding="longest", truncation=True, max_length=CLS_LENGTH,
                            return_tensors="np")
    logits = classifier(ids_of(enc))
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    best = probs.argmax(-1)
    return {"class": best.tolist(), "prob": probs.tolist(), "label": [LABELS[i] for i in best]}

  def answer(pairs):
    contexts = [p[1] for p in pairs]
    enc = tokenizers["squad"](
        [p[0] for p in pairs], contexts, truncation="only_second", max_length=SQUAD_LENGTH,
        stride=DOC_STRIDE, return_overflowing_tokens=True, return_offsets_mapping=True,
        padding="longest", return_tensors="np")
    start, end = span_model(ids_of(enc))
    return {"answer": best_answers(enc, start, end, contexts)}

  return {"classify": (list, classify), "answer": (list, answer),
          "ids_cls": (ids_feed, lambda feed: classifier(feed)[0]),
          "ids_squad": (ids_feed, lambda feed: span_model(feed)[0][0])}


def reply(message: dict) -> None:
  print("@@ " + json.dumps(message), flush=True)


def worker(spec: dict) -> None:
  """Loads one side, says which tasks it serves, then times each chunk it is sent."""
  if spec["side"] in ("transformers", "onnxruntime"):
    models = torch_models if spec["side"] == "transformers" else ort_models
    tasks = hf_tasks(*models(spec["manifest"], spec["threads"]))
  else:
    tasks = ours_tasks(spec["paths"], spec["threads"])
  reply({"tasks": sorted(t for t in tasks if not t.startswith("_"))})
  for line in sys.stdin:
    message = json.loads(line)
    prepare, run = tasks[WORKLOADS[message["workload"]][0]]
    ms, outputs = [], []
    for batch in message["batches"]:
      batch = prepare(batch)
      start = time.perf_counter()
      out = run(batch)
      ms.append(1e3 * (time.perf_counter() - start))
      outputs.append(out.tolist() if isinstance(out, np.ndarray) else out)
    reply({"ms": ms, "out": outputs})


# ---- the parent: workers, rounds, the table ---------------------------------------------

class Side:
  """A worker process of one side; `run` sends it a chunk and waits for the timings."""

  def __init__(self, name: str, spec: dict, root: str):
    self.name = name
    self.log = os.path.join(root, f"worker-{name}.log")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "HF_HUB_OFFLINE": "1",
           "RAYON_NUM_THREADS": str(spec["threads"])}
    with open(self.log, "w") as log:
      self.process = subprocess.Popen(
          [sys.executable, os.path.abspath(__file__), f"--worker={json.dumps(spec)}"],
          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    self.tasks = set()  # what it serves, once it has loaded (start_sides)

  def receive(self) -> dict:
    for line in self.process.stdout:
      if line.startswith("@@ "):
        return json.loads(line[3:])
    tail = open(self.log).read()[-3000:]
    raise SystemExit(f"the {self.name} worker stopped:\n{tail}")

  def serves(self, workload: str) -> bool:
    return WORKLOADS[workload][0] in self.tasks

  def run(self, workload: str, batches: list) -> dict:
    self.process.stdin.write(json.dumps({"workload": workload, "batches": batches}) + "\n")
    self.process.stdin.flush()
    return self.receive()

  def close(self) -> None:
    self.process.stdin.close()
    self.process.wait(timeout=60)


def chunk(inputs: dict, workload: str, index: int, quick: bool) -> list:
  """The batches of chunk `index` of a workload (chunk 0 warms up; the inputs wrap around)."""
  task, batch, seq, calls, quick_calls = WORKLOADS[workload]
  calls = quick_calls if quick else calls
  if task.startswith("ids"):
    return [[batch, seq]] * calls
  items = inputs["short" if task == "classify" else "long"]
  first = index * calls * batch
  return [[items[(first + c * batch + i) % len(items)] for i in range(batch)]
          for c in range(calls)]


def agreement(task: str, outputs: list, reference: list) -> str:
  """How far `outputs` (a list of calls' results) are from the reference side's."""
  def flat(calls, key):
    return [x for out in calls for x in out[key]]

  if task == "classify":
    same = np.mean(np.equal(flat(outputs, "class"), flat(reference, "class")))
    diff = np.abs(np.subtract(flat(outputs, "prob"), flat(reference, "prob"))).max()
    return f"class {100 * same:.0f}%, max |dp| {diff:.1e}"
  if task == "answer":
    same = np.mean([a == b for a, b in zip(flat(outputs, "answer"), flat(reference, "answer"))])
    return f"answer {100 * same:.0f}%"
  return f"max |dlogit| {np.abs(np.subtract(outputs, reference)).max():.1e}"


def start_sides(args, root: str) -> list[Side]:
  manifest = json.load(open(os.path.join(root, "manifest.json")))
  manifest["heads"] = os.path.join(root, "heads.npz")
  specs = {}
  for name in args.sides.split(","):
    if name not in BASE_SIDES:
      raise SystemExit(f"--sides: {name!r} is not one of {BASE_SIDES}")
    specs[name] = {"side": name, "manifest": manifest, "threads": args.threads,
                   "paths": [manifest["ours_cls"], manifest["ours_squad"]]}
  for variant in args.ours_variant:
    name, _, path = variant.partition("=")
    if not path or name in specs:
      raise SystemExit(f"--ours_variant={variant}: give NAME=DIR with a new NAME")
    specs[name] = {"side": "ours", "paths": [os.path.abspath(p) for p in path.split(",")],
                   "threads": args.threads}
  sides = [Side(name, spec, root) for name, spec in specs.items()]
  for side in sides:  # they load side by side; nothing is timed yet
    side.tasks = set(side.receive()["tasks"])
  return sides


def measure(args, root: str, sides: list[Side]) -> dict:
  """Warms every side up on every workload, then runs the rounds; {(workload, side): ...}."""
  inputs = json.load(open(os.path.join(root, "inputs.json")))
  for side in sides:
    for workload in WORKLOADS:
      if side.serves(workload):
        side.run(workload, chunk(inputs, workload, 0, args.quick))
  results = {(w, s.name): {"ms": [], "out": []} for w in WORKLOADS for s in sides
             if s.serves(w)}
  for r in range(args.rounds):
    order = sides[r % len(sides):] + sides[:r % len(sides)]
    print(f"round {r + 1}/{args.rounds}: {', '.join(s.name for s in order)}", flush=True)
    for workload in WORKLOADS:
      batches = chunk(inputs, workload, r + 1, args.quick)
      for side in order:
        if side.serves(workload):
          done = side.run(workload, batches)
          for key in ("ms", "out"):
            results[workload, side.name][key] += done[key]
  return results


def summarize(results: dict, names: list[str], reference: str) -> list[dict]:
  """One row per (workload, side): latency, throughput, ratio and agreement."""
  rows = []
  for workload, (task, batch, *_) in WORKLOADS.items():
    here = [name for name in names if (workload, name) in results]
    if not here:
      continue
    for name in here:
      ms, ref = np.array(results[workload, name]["ms"]), results.get((workload, reference))
      rows.append({"workload": workload, "side": name, "calls": len(ms), "batch_size": batch,
                   "p50_ms": round(float(np.percentile(ms, 50)), 2),
                   "p99_ms": round(float(np.percentile(ms, 99)), 2),
                   "sequences_per_s": round(batch * len(ms) / (ms.sum() / 1e3), 2),
                   "agreement": "(reference)" if name == reference or not ref else
                   agreement(task, results[workload, name]["out"], ref["out"])})
    others = [row["sequences_per_s"] for row in rows[-len(here):]
              if row["side"] in BASE_SIDES[1:]]
    for row in rows[-len(here):]:
      if row["side"] not in BASE_SIDES[1:] and others:
        row["ours_over_fastest"] = round(max(others) / row["sequences_per_s"], 2)
  return rows


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--threads", type=int, default=2, help="intra-op threads per side")
  parser.add_argument("--sides", default=",".join(BASE_SIDES), help="comma-separated")
  parser.add_argument("--ours_variant", action="append", default=[],
                      metavar="NAME=DIR", help="another SavedModel version dir, as a side")
  parser.add_argument("--quick", action="store_true", help="1 round on few inputs")
  parser.add_argument("--keep_dir", help="write the artifacts here once and reuse them")
  parser.add_argument("--worker", help=argparse.SUPPRESS)  # one side, in a child process
  parser.add_argument("--build", help=argparse.SUPPRESS)  # the artifacts, in a child process
  args = parser.parse_args()
  if args.worker:
    return worker(json.loads(args.worker))
  if args.build:
    sys.path.insert(0, ROOT)
    return build(args.build)
  if args.quick:
    args.rounds = 1
  info, load_before = machine(), os.getloadavg()
  with tempfile.TemporaryDirectory() as tmp:
    root = os.path.abspath(args.keep_dir or tmp)
    if not os.path.isfile(os.path.join(root, "manifest.json")):
      print(f"exporting the models to {root} ...", flush=True)
      os.makedirs(root, exist_ok=True)
      subprocess.run([sys.executable, os.path.abspath(__file__), f"--build={root}"],
                     check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    sides = start_sides(args, root)
    results = measure(args, root, sides)
    for side in sides:
      side.close()
  names = [side.name for side in sides]
  reference = "ours" if "ours" in names else names[0]
  rows = summarize(results, names, reference)
  load_after = os.getloadavg()
  flags = ", ".join(f"{k} {'yes' if info[k] else 'no'}" for k in ("amx_bf16", "avx512_bf16"))
  print(f"\nCPU: {info['cpu']}, {info['cores']} cores, {flags}; {args.threads} intra-op "
        "threads per side; "
        f"load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{' '.join(f'{x:.2f}' for x in load_after)} after")
  print(f"commit {info['commit']}; command: python {' '.join(sys.argv)}")
  print(f"{args.rounds} round(s); agreement is with {reference}\n")
  print("| workload | side | p50 ms | p99 ms | sequences/s | ours / fastest | agreement |")
  print("|---|---|---|---|---|---|---|")
  for r in rows:
    ratio = r.get("ours_over_fastest", "")
    print(f"| {r['workload']} | {r['side']} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
          f"{r['sequences_per_s']:.1f} | {ratio} | {r['agreement']} |")
  for r in rows:
    print(json.dumps(r))


if __name__ == "__main__":
  main()
