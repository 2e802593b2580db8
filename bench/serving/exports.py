"""Every export format on the real all-MiniLM-L6-v2 weights: size on disk, load time in a
fresh process and single-example latency, each read by its own consumer, beside our TF
Serving SavedModel.

  python bench/serving/exports.py [--processes=3] [--calls=50] [--threads=2] [--keep_dir=DIR]

Exports the MiniLM encoder (from the Hugging Face folder of requirements-data.txt) as a
TF Serving SavedModel (--task=pretraining), TF Hub encoder, keras-hub preset and ONNX
encoder, and a movie-review classifier on it (a fine-tuning run directory; its head is
untrained, which no figure here depends on) as a SavedModel, ONNX and float / int8 TFLite
models. Then, per artifact, `--processes` fresh Python processes each import the
consumer's library, load the artifact, call it once, warm up and time `--calls` calls on
one real dev-set sentence as int32 ids [1, 128] (tokenization excluded everywhere, as the
ONNX and TFLite models leave it outside). Prints a markdown table, with the largest
difference from our Keras model on that sentence as a check that each consumer runs the
same model, and the CPU, load average, commit and command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from serving_lib import machine, minilm_classifier, minilm_dir, save_classifier

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ_LENGTH = 128  # what TF Hub's preprocessor packs to; the TFLite models' fixed length
ID_KEYS = ("input_ids", "input_mask", "segment_ids")
HUB_KEYS = {"input_word_ids": "input_ids", "input_mask": "input_mask",
            "input_type_ids": "segment_ids"}


# ---- the child: one consumer in a fresh process ----------------------------------------

def _consumer(kind: str, path: str, output: str, threads: int):
  """(import seconds, a loader of `path` returning a call on the ids dict) for `kind`."""
  start = time.perf_counter()
  if kind in ("saved_model", "tfhub", "keras_hub"):
    if kind == "keras_hub":
      os.environ["KERAS_BACKEND"] = "tensorflow"
      import keras_hub
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    if kind == "tfhub":
      import tensorflow_hub as hub
    if kind == "saved_model":
      import tensorflow_text  # noqa: F401  registers the ops of the text signatures
  elif kind == "onnx":
    import onnxruntime as ort
  else:
    from ai_edge_litert.interpreter import Interpreter
  imported = time.perf_counter() - start

  def load():
    if kind == "saved_model":
      serve = tf.saved_model.load(path).signatures["serving_default"]
      return lambda feed: serve(**{k: tf.constant(v) for k, v in feed.items()})[output]
    if kind == "tfhub":
      layer = hub.KerasLayer(path)
      return lambda feed: layer({h: feed[k] for h, k in HUB_KEYS.items()})[output]
    if kind == "keras_hub":
      backbone = keras_hub.models.ElectraBackbone.from_preset(path)
      return lambda feed: backbone.predict_on_batch(
          {"token_ids": feed["input_ids"], "segment_ids": feed["segment_ids"],
           "padding_mask": feed["input_mask"]})[output]
    if kind == "onnx":
      options = ort.SessionOptions()
      options.intra_op_num_threads = threads
      session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
      return lambda feed: session.run([output], feed)[0]
    runner = Interpreter(model_path=path, num_threads=threads).get_signature_runner(
        "serving_default")
    return lambda feed: runner(**feed)[output]

  return imported, load


def child(args) -> None:
  feed = dict(np.load(args.inputs))
  imported, load = _consumer(args.child, args.path, args.output, args.threads)
  start = time.perf_counter()
  call = load()
  loaded = time.perf_counter() - start
  start = time.perf_counter()
  out = np.asarray(call(feed))
  first = time.perf_counter() - start
  for _ in range(5):
    call(feed)
  latencies = []
  for _ in range(args.calls):
    start = time.perf_counter()
    np.asarray(call(feed))
    latencies.append(time.perf_counter() - start)
  np.save(args.out + ".npy", out)
  with open(args.out, "w") as f:
    json.dump({"import_s": imported, "load_s": loaded, "first_ms": 1e3 * first,
               "latency_ms": [1e3 * t for t in latencies]}, f)


# ---- the parent: exports, references, fresh processes, the table -----------------------

def _size_mib(path: str) -> float:
  if os.path.isfile(path):
    return os.path.getsize(path) / 2**20
  return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
             for f in files) / 2**20


def _classifier_run(root: str):
  """(a movie-review classifier on the MiniLM encoder, its fine-tuning run directory)."""
  model, config, vocab_path = minilm_classifier(SEQ_LENGTH)
  return model, save_classifier(model, config, vocab_path, os.path.join(root, "run"))


def export_all(root: str) -> tuple[list[dict], dict[str, np.ndarray], str]:
  """Writes every artifact under `root`; (rows, our Keras outputs, the sentence)."""
  import tensorflow as tf

  from electra_tf.data.tokenizer import make_tokenizer
  from electra_tf.serving import exporters, onnx_export, saved_model, sources, tflite_export
  from electra_tf.serving import text as serving_text
  from electra_tf.tasks import classification_data

  minilm = minilm_dir()
  encoder = sources.load_encoder(minilm)
  classifier, run_dir = _classifier_run(root)
  sentence = classification_data.movie_reviews(seed=0)[2][0].texts[0]
  feed = serving_text.pack_sentences(make_tokenizer(encoder.vocab),
                                     [tf.constant([sentence])], SEQ_LENGTH, 101, 102,
                                     buckets=(SEQ_LENGTH,))
  np.savez(os.path.join(root, "inputs.npz"), **{k: feed[k].numpy() for k in ID_KEYS})
  reference = {"encoder": encoder.encoder(feed, training=False).numpy(),
               "classifier": classifier(feed, training=False)["logits"].numpy(),
               "mask": feed["input_mask"].numpy().astype(bool)}

  def timed(name, write):
    start = time.perf_counter()
    write(os.path.join(root, name))
    return time.perf_counter() - start

  rows, out = [], lambda *p: os.path.join(root, *p)
  seconds = {}
  seconds["sm_enc"] = timed("sm_enc", lambda d: saved_model.export(minilm, "pretraining", d))
  seconds["sm_cls"] = timed("sm_cls", lambda d: saved_model.export(run_dir, None, d))
  for fmt in ("tfhub", "keras_hub", "onnx"):
    seconds[fmt] = timed(fmt, lambda d, f=fmt: exporters.export(f, minilm, None, d))
  seconds["onnx_cls"] = timed("onnx_cls", lambda d: onnx_export.export(
      sources.load_task(run_dir, "onnx"), d))
  seconds["tflite"] = timed("tflite", lambda d: tflite_export.export(
      sources.load_task(run_dir, "tflite"), d))
  # (model, format, consumer kind, what is loaded, what is sized, output, export seconds)
  for spec in (
      ("encoder", "SavedModel (ours, --task=pretraining)", "saved_model", out("sm_enc", "1"),
       out("sm_enc", "1"), "hidden_states", seconds["sm_enc"]),
      ("encoder", "tfhub (encoder/; preprocessor/ beside it)", "tfhub", out("tfhub", "encoder"),
       out("tfhub"), "sequence_output", seconds["tfhub"]),
      ("encoder", "keras_hub preset (tanh GELU, as built)", "keras_hub", out("keras_hub"),
       out("keras_hub"), "sequence_output", seconds["keras_hub"]),
      ("encoder", "onnx", "onnx", out("onnx", onnx_export.MODEL_NAME), out("onnx"),
       "sequence_output", seconds["onnx"]),
      ("classifier", "SavedModel (ours)", "saved_model", out("sm_cls", "1"), out("sm_cls", "1"),
       "logits", seconds["sm_cls"]),
      ("classifier", "onnx", "onnx", out("onnx_cls", onnx_export.MODEL_NAME), out("onnx_cls"),
       "logits", seconds["onnx_cls"]),
      ("classifier", "tflite float32", "tflite", out("tflite", tflite_export.FLOAT_NAME),
       out("tflite", tflite_export.FLOAT_NAME), "logits", seconds["tflite"]),
      ("classifier", "tflite int8 (dynamic range)", "tflite",
       out("tflite", tflite_export.INT8_NAME), out("tflite", tflite_export.INT8_NAME),
       "logits", None)):
    model, fmt, kind, path, sized, output, export_s = spec
    rows.append({"model": model, "format": fmt, "kind": kind, "path": path,
                 "size_mib": _size_mib(sized), "output": output, "export_s": export_s})
  return rows, reference, sentence


def measure(row: dict, root: str, args) -> dict:
  """Runs `args.processes` fresh consumer processes on one artifact; medians."""
  results, outputs = [], []
  for i in range(args.processes):
    out = os.path.join(root, f"result-{row['kind']}-{abs(hash(row['path']))}-{i}.json")
    subprocess.run([sys.executable, os.path.abspath(__file__), f"--child={row['kind']}",
                    f"--path={row['path']}", f"--output={row['output']}",
                    f"--inputs={os.path.join(root, 'inputs.npz')}", f"--out={out}",
                    f"--calls={args.calls}", f"--threads={args.threads}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    results.append(json.load(open(out)))
    outputs.append(np.load(out + ".npy"))
  latencies = sorted(t for r in results for t in r["latency_ms"])
  return {**row, "output_value": outputs[-1],
          **{k: statistics.median(r[k] for r in results)
             for k in ("import_s", "load_s", "first_ms")},
          "p50_ms": statistics.median(latencies),
          "p90_ms": latencies[int(0.9 * (len(latencies) - 1))]}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--processes", type=int, default=3, help="fresh processes per artifact")
  parser.add_argument("--calls", type=int, default=50, help="timed calls per process")
  parser.add_argument("--threads", type=int, default=2, help="each runtime's intra-op threads")
  parser.add_argument("--keep_dir", help="write the artifacts here and keep them")
  for name in ("child", "path", "output", "inputs", "out"):  # one fresh consumer process
    parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    return child(args)
  sys.path.insert(0, ROOT)
  host = machine()
  with tempfile.TemporaryDirectory() as tmp:
    root = args.keep_dir or tmp
    os.makedirs(root, exist_ok=True)
    rows, reference, sentence = export_all(root)
    measured = [measure(row, root, args) for row in rows]
  mask = reference["mask"]
  print(f"\nall-MiniLM-L6-v2 (6 layers, hidden 384); one dev-set movie review, {mask.sum()} "
        f"tokens padded to {SEQ_LENGTH}: {sentence!r}")
  print(f"{args.processes} fresh processes per artifact, each {args.calls} timed calls after "
        f"6 untimed; {args.threads} intra-op threads per runtime\n")
  print("| model | format | consumer | size (MiB) | import (s) | load (s) | first call (ms) "
        "| latency p50 (ms) | p90 (ms) | max abs diff vs Keras | export (s) |")
  print("|---|---|---|---|---|---|---|---|---|---|---|")
  consumers = {"saved_model": "tf.saved_model.load", "tfhub": "hub.KerasLayer",
               "keras_hub": "ElectraBackbone.from_preset", "onnx": "onnxruntime",
               "tflite": "ai_edge_litert Interpreter"}
  for m in measured:
    want = reference[m["model"]]
    got = m["output_value"]
    diff = np.abs(got - want)[mask].max() if m["model"] == "encoder" else np.abs(got - want).max()
    export = f"{m['export_s']:.1f}" if m["export_s"] is not None else "(with float32)"
    print(f"| {m['model']} | {m['format']} | {consumers[m['kind']]} | {m['size_mib']:.1f} | "
          f"{m['import_s']:.2f} | {m['load_s']:.2f} | {m['first_ms']:.0f} | {m['p50_ms']:.1f} | "
          f"{m['p90_ms']:.1f} | {diff:.1e} | {export} |")
  after = os.getloadavg()
  print(f"\nCPU: {host['cpu']}, {host['cores']} cores, amx_bf16 "
        f"{'yes' if host['amx_bf16'] else 'no'}; load average (1, 5, 15 min) "
        f"{' '.join(f'{x:.2f}' for x in host['load_average'])} before, "
        f"{' '.join(f'{x:.2f}' for x in after)} after")
  print(f"commit {host['commit']}; command: python {' '.join(sys.argv)}")


if __name__ == "__main__":
  main()
