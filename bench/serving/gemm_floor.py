"""What bounds one short sentence's latency: the transformer's matrix products alone in
TensorFlow, beside PyTorch's and beside ONNX Runtime's whole model.

The 36 products of all-MiniLM-L6-v2's six blocks (per block Q, K, V and output 384 x 384,
then 384 x 1536 and 1536 x 384) on M rows (M tokens of one sentence), chained as in the
model, with random weights:

  tf float32        tf.matmul on variables (what a SavedModel reads)
  tf float32 const  the same function with the weights frozen into constants
  tf bfloat16       bfloat16 weights and activations (what --serving_dtype=bfloat16 runs)
  torch float32     torch.matmul

and, with --onnx=DIR (an `electra-export --format=onnx` of a MiniLM classifier, e.g. the
onnx_cls folder of bench/serving/serving.py --keep_dir), ONNX Runtime running that whole
model on [1, M] ids (its threads not spinning between calls, which would take the cores
from the next side). Side by side in one process, in alternating rounds; 2 threads each.

With --run=RUN_DIR --saved_model=VERSION_DIR (a fine-tuning run of a MiniLM classifier and
its SavedModel, as bench/serving/serving.py --keep_dir leaves in cls_run and ours_cls/1), the
whole model too, on [1, M] ids, in fresh processes with 1 and with 2 intra-op threads, alternating:
the SavedModel's serving_default, and the Keras model's serving form as a tf.function with
and without jit_compile (XLA).

  python bench/serving/gemm_floor.py [--rows=27,64,128] [--onnx=DIR] [--rounds=30]
      [--run=RUN_DIR --saved_model=VERSION_DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

import numpy as np

WIDTH, INNER, LAYERS = 384, 1536, 6


def whole_model(args) -> None:
  """(child) p50 ms of the whole classifier on [1, rows] ids at --threads intra-op threads."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  the SavedModel's text signatures need its ops

  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  from electra_tf.model import fused
  from electra_tf.training.finetuned import load_finetuned

  served = tf.saved_model.load(args.saved_model).signatures["serving_default"]
  model, _ = load_finetuned(os.path.join(args.run, "best"))

  def forward(inputs):
    with fused.serving_graph():
      return model(inputs, training=False)["logits"]

  spec = [{k: tf.TensorSpec([None, None], tf.int32) for k in ("input_ids", "input_mask",
                                                             "segment_ids")}]
  graph = tf.function(forward, input_signature=spec)
  xla = tf.function(forward, input_signature=spec, jit_compile=True)
  out = {}
  for rows in (int(r) for r in args.rows.split(",")):
    ids = tf.fill([1, rows], 2000)
    feed = {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
    calls = {"SavedModel serving_default": lambda f=feed: served(**f)["logits"].numpy(),
             "Keras serving form": lambda f=feed: graph(f).numpy(),
             "Keras serving form, XLA": lambda f=feed: xla(f).numpy()}
    for name, call in calls.items():
      call(), call()
      times = []
      for _ in range(args.rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
      out[f"{name}|{rows}"] = 1e3 * float(np.median(times))
  print("RESULT " + json.dumps(out))


def whole_model_table(args) -> None:
  """Fresh child processes at 1 and 2 threads, alternating three times; medians."""
  results = collections.defaultdict(list)
  for _ in range(3):
    for threads in (1, 2):
      run = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                            f"--run={args.run}", f"--saved_model={args.saved_model}",
                            f"--rows={args.rows}",
                            f"--rounds={args.rounds}", f"--threads={threads}"],
                           capture_output=True, text=True, check=False,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
      lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
      if run.returncode or not lines:
        sys.exit(f"whole-model child failed:\n{run.stderr[-3000:]}")
      for key, ms in json.loads(lines[-1][len("RESULT "):]).items():
        results[(key, threads)].append(ms)
  rows = args.rows.split(",")
  print("\n| whole model, [1, M] ids | threads | " + " | ".join(f"M = {r}" for r in rows)
        + " |\n|---|---|" + "---|" * len(rows))
  for name in ("SavedModel serving_default", "Keras serving form", "Keras serving form, XLA"):
    for threads in (1, 2):
      cells = [f"{np.median(results[(f'{name}|{r}', threads)]):.2f} ms" for r in rows]
      print(f"| {name} | {threads} | " + " | ".join(cells) + " |")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", default="27,64,128")
  parser.add_argument("--onnx", help="an ONNX export folder of a MiniLM classifier")
  parser.add_argument("--run", help="a fine-tuning run of a MiniLM classifier")
  parser.add_argument("--saved_model", help="its SavedModel version directory")
  parser.add_argument("--rounds", type=int, default=30)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    return whole_model(args)

  import tensorflow as tf
  import torch
  from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
  )

  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  torch.set_num_threads(args.threads)
  rng = np.random.default_rng(0)
  shapes = ([WIDTH, WIDTH],) * 4 + ([WIDTH, INNER], [INNER, WIDTH])
  weights = [rng.normal(0, 0.02, shape).astype(np.float32)
             for _ in range(LAYERS) for shape in shapes]

  def chain(matmul, x, ws):
    for layer in range(LAYERS):
      q, k, v, o, up, down = ws[6 * layer:6 * layer + 6]
      x = matmul(matmul(matmul(matmul(x, q) + matmul(x, k) + matmul(x, v), o), up), down)
    return x

  f32 = [tf.Variable(w) for w in weights]
  bf16 = [tf.Variable(tf.cast(w, tf.bfloat16)) for w in weights]
  spec = [tf.TensorSpec([None, WIDTH], tf.float32)]
  tf_f32 = tf.function(lambda x: chain(tf.matmul, x, f32), input_signature=spec)
  tf_const = convert_variables_to_constants_v2(tf_f32.get_concrete_function())
  tf_bf16 = tf.function(lambda x: tf.cast(chain(tf.matmul, tf.cast(x, tf.bfloat16), bf16),
                                          tf.float32), input_signature=spec)
  torch_weights = [torch.from_numpy(w) for w in weights]
  session = None
  if args.onnx:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
    # Its threads would otherwise spin after each call, taking the cores from the next side.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(os.path.join(args.onnx, "model.onnx"), options,
                                   providers=["CPUExecutionProvider"])

  flops_per_row = LAYERS * (4 * WIDTH * WIDTH + 2 * WIDTH * INNER) * 2
  print("| rows | " + " | ".join(["tf float32", "tf float32 const", "tf bfloat16",
                                   "torch float32"] + (["onnxruntime whole model"]
                                                       if session else [])) + " |")
  print("|---|" + "---|" * (5 if session else 4))
  def calls_for(rows: int) -> dict:
    x = rng.normal(size=(rows, WIDTH)).astype(np.float32)
    x_tf, x_torch = tf.constant(x), torch.from_numpy(x)
    ids = np.full([1, rows], 2000, np.int32)
    feed = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}

    def torch_call():
      with torch.inference_mode():
        return chain(torch.matmul, x_torch, torch_weights).numpy()

    calls = {"tf float32": lambda: tf_f32(x_tf).numpy(),
             "tf float32 const": lambda: tf_const(x_tf)[0].numpy(),
             "tf bfloat16": lambda: tf_bf16(x_tf).numpy(), "torch float32": torch_call}
    if session:
      calls["onnxruntime whole model"] = lambda: session.run(None, feed)
    return calls

  for rows in (int(r) for r in args.rows.split(",")):
    calls = calls_for(rows)
    times = collections.defaultdict(list)
    for call in calls.values():  # warm-up
      call(), call()
    for _ in range(args.rounds):
      for name, call in calls.items():
        start = time.perf_counter()
        call()
        times[name].append(time.perf_counter() - start)
    cells = []
    for name in calls:
      p50 = float(np.median(times[name]))
      rate = "" if name.startswith("onnx") else f" ({flops_per_row * rows / p50 / 1e9:.0f} GFLOP/s)"
      cells.append(f"{1e3 * p50:.2f} ms{rate}")
    print(f"| {rows} | " + " | ".join(cells) + " |")
  if args.run and args.saved_model:
    whole_model_table(args)
  info = open("/proc/cpuinfo").read()
  print("\nCPU: " + next(line.split(":", 1)[1].strip() for line in info.splitlines()
                         if line.startswith("model name"))
        + f"; {args.threads} threads each; p50 of {args.rounds} alternating rounds")


if __name__ == "__main__":
  main()
