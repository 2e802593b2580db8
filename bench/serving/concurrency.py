"""What N concurrent single-sentence clients get from our classifier SavedModel, with and
without server-side batching, measured in process on this machine's CPU.

  python bench/serving/concurrency.py [--seconds=10] [--warmup=2] [--threads=2]
      [--batch_settings=32:2000:1,32:5000:1,32:2000:2] [--print_params] [--quick]

tensorflow_model_server is not used: one process loads the exported SavedModel with
tf.saved_model.load and stands in for the server, and N Python threads in it stand in for
its clients (no gRPC, no request serialization). The model is a 2-class classifier on the
all-MiniLM-L6-v2 encoder (requirements-data.txt; random head with a fixed seed, which no
timing depends on), saved like finetune.py and exported with max_seq_length 128. Each
client sends one dev-set movie review per request to the `classify_text` signature, closed
loop (the next request when the answer comes), for N = 1, 2, 4, 8, 16, 32.

Modes, each in its own fresh process (TF's thread pools are fixed at start):
  no batching  every client calls the signature itself and TF runs the calls concurrently;
               with 1 and with 2 inter-op threads.
  batching     clients call a tf.function that wraps the signature in TF's BatchFunction op,
               whose kernel queues calls with the batch scheduler library that TF Serving's
               --enable_batching also uses (tensorflow/core/kernels/batching_util); its
               max_batch_size, batch_timeout_micros, num_batch_threads and
               allowed_batch_sizes mirror a batching_parameters_file. Each --batch_settings
               entry is max_batch_size:batch_timeout_micros:num_batch_threads with an
               optional :allowed sizes joined by '/' (e.g. 32:2000:1:8/16/32); 2 inter-op
               threads.
All modes use --threads intra-op threads. Per mode and N: requests/s over --seconds after
--warmup seconds, p50 and p99 latency of the requests that finished in that window, and the
mean batch the model ran over warm-up and window (requests per batched call, and rows per
call with allowed_batch_sizes' padding); batched probabilities are checked against unbatched
ones on 8 concurrent requests.
Prints a markdown table per mode, one JSON line per row, the CPU, load average, commit and
command; --print_params adds the TF Serving batching_parameters_file text of the batching
setting with the most requests/s at the largest N. --quick: 2 s windows after 1 s of
warm-up, N = 1 and 8: a check that everything runs, too short for figures to quote.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from serving_lib import machine, minilm_classifier, save_classifier

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ_LENGTH = 128
CLIENTS, QUICK_CLIENTS = (1, 2, 4, 8, 16, 32), (1, 8)
MAX_ENQUEUED_BATCHES = 100  # never reached: at most 32 requests wait


# ---- the server: one mode in a fresh process -------------------------------------------

def batched_call(signature, setting: dict, name: str):
  """(a call on one [1] string tensor through BatchFunction, its tf.Variable counters)."""
  import tensorflow as tf

  batches = tf.Variable(0, dtype=tf.int64)
  rows = tf.Variable(0, dtype=tf.int64)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def run_batch(text):
    batches.assign_add(1)
    rows.assign_add(tf.cast(tf.size(text), tf.int64))
    return signature(text=text)

  computation = run_batch.get_concrete_function()

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve(text):
    outputs = tf.raw_ops.BatchFunction(
        in_tensors=[text], captured_tensors=computation.captured_inputs, f=computation,
        num_batch_threads=setting["num_batch_threads"],
        max_batch_size=setting["max_batch_size"],
        batch_timeout_micros=setting["batch_timeout_micros"],
        allowed_batch_sizes=setting["allowed_batch_sizes"],
        max_enqueued_batches=MAX_ENQUEUED_BATCHES, shared_name=name,
        Tout=[o.dtype for o in computation.outputs])
    return tf.nest.pack_sequence_as(computation.structured_outputs, outputs,
                                    expand_composites=True)

  return serve, {"batches": batches, "rows": rows}


def run_clients(call, sentences: list, clients: int, warmup: float, seconds: float) -> dict:
  """Closed-loop clients for warmup + seconds; figures of the requests ending in the window."""
  done, stop = [[] for _ in range(clients)], threading.Event()

  def client(i: int) -> None:
    k = i
    while not stop.is_set():
      start = time.perf_counter()
      call(sentences[k % len(sentences)])["class_ids"].numpy()
      done[i].append((start, time.perf_counter()))
      k += clients

  threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
  begin = time.perf_counter()
  for t in threads:
    t.start()
  time.sleep(warmup + seconds)
  stop.set()
  for t in threads:
    t.join()
  low, high = begin + warmup, begin + warmup + seconds
  latencies = np.array([e - s for d in done for s, e in d if low <= e <= high]) * 1e3
  return {"clients": clients, "requests": len(latencies),
          "requests_per_s": round(len(latencies) / seconds, 1),
          "p50_ms": round(float(np.percentile(latencies, 50)), 1),
          "p99_ms": round(float(np.percentile(latencies, 99)), 1),
          "all_requests": sum(len(d) for d in done)}


def child(args) -> None:
  import tensorflow as tf

  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
  import tensorflow_text  # noqa: F401  registers the ops of the text signatures

  from electra_tf.tasks import classification_data

  config = json.loads(args.child)
  loaded = tf.saved_model.load(args.path)  # kept: its signatures only weakly hold variables
  signature = loaded.signatures["classify_text"]
  sentences = [tf.constant([e.texts[0]]) for e in classification_data.movie_reviews(seed=0)[2]]
  direct = lambda text: signature(text=text)  # noqa: E731
  call, counters = direct, None
  if config["mode"] == "batching":
    call, counters = batched_call(signature, config, f"batch_{os.getpid()}")
  for _ in range(3):  # traces and warms both paths
    call(sentences[0]), direct(sentences[0])
  want = np.concatenate([direct(s)["probabilities"].numpy() for s in sentences[:8]])
  with ThreadPoolExecutor(8) as pool:  # concurrent, so that they are batched together
    got = list(pool.map(lambda s: call(s)["probabilities"].numpy(), sentences[:8]))
  max_diff = float(np.abs(np.concatenate(got) - want).max())
  rows = []
  for clients in args.clients:
    before = {k: int(v.numpy()) for k, v in (counters or {}).items()}
    row = run_clients(call, sentences, clients, args.warmup, args.seconds)
    if counters:
      batches = int(counters["batches"].numpy()) - before["batches"]
      padded = int(counters["rows"].numpy()) - before["rows"]
      row["mean_batch"] = round(row["all_requests"] / batches, 2)
      row["mean_padded_batch"] = round(padded / batches, 2)
    else:
      row["mean_batch"] = row["mean_padded_batch"] = 1.0
    rows.append({**config, "inter_op": args.inter_op, **row,
                 "max_abs_diff_vs_unbatched": max_diff if counters else 0.0})
  with open(args.out, "w") as f:
    json.dump(rows, f)


# ---- the parent: the export, one fresh process per mode, the tables -------------------

def export_classifier(root: str) -> str:
  """A movie-review classifier run directory on MiniLM, exported; its version directory."""
  from electra_tf.serving import saved_model

  model, config, vocab_path = minilm_classifier(SEQ_LENGTH)
  run = save_classifier(model, config, vocab_path, os.path.join(root, "run"))
  return saved_model.export(run, None, os.path.join(root, "export"))


def parse_setting(text: str) -> dict:
  parts = text.split(":")
  allowed = [int(x) for x in parts[3].split("/")] if len(parts) > 3 else []
  return {"mode": "batching", "max_batch_size": int(parts[0]),
          "batch_timeout_micros": int(parts[1]), "num_batch_threads": int(parts[2]),
          "allowed_batch_sizes": allowed}


def params_text(setting: dict) -> str:
  """The setting as a TF Serving batching_parameters_file (BatchingParameters text proto)."""
  lines = [f"{k} {{ value: {setting[k]} }}" for k in
           ("max_batch_size", "batch_timeout_micros", "num_batch_threads")]
  lines.append(f"max_enqueued_batches {{ value: {MAX_ENQUEUED_BATCHES} }}")
  lines += [f"allowed_batch_sizes: {size}" for size in setting["allowed_batch_sizes"]]
  lines.append("pad_variable_length_inputs: false")  # the one input is a [N] string
  return "\n".join(lines)


def describe(config: dict) -> str:
  if config["mode"] != "batching":
    return f"no batching, {config['inter_op']} inter-op threads"
  allowed = config["allowed_batch_sizes"]
  return (f"batching: max_batch_size {config['max_batch_size']}, batch_timeout_micros "
          f"{config['batch_timeout_micros']}, num_batch_threads {config['num_batch_threads']}"
          f", allowed_batch_sizes {allowed or 'none'}; {config['inter_op']} inter-op threads")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seconds", type=float, default=10.0, help="timed window per N")
  parser.add_argument("--warmup", type=float, default=2.0, help="untimed seconds per N")
  parser.add_argument("--threads", type=int, default=2, help="TF intra-op threads")
  parser.add_argument("--batch_settings", default="32:2000:1,32:5000:1,32:2000:2",
                      help="max_batch_size:batch_timeout_micros:num_batch_threads[:a/b/c],...")
  parser.add_argument("--print_params", action="store_true",
                      help="print the best batching setting as a batching_parameters_file")
  parser.add_argument("--quick", action="store_true", help="2 s windows, N = 1 and 8")
  parser.add_argument("--child", help=argparse.SUPPRESS)  # one mode, as JSON
  for name in ("path", "out"):
    parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
  parser.add_argument("--inter_op", type=int, default=2, help=argparse.SUPPRESS)
  parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")],
                      default=list(CLIENTS), help=argparse.SUPPRESS)
  args = parser.parse_args()
  sys.path.insert(0, ROOT)
  if args.child:
    return child(args)
  if args.quick:
    args.seconds, args.warmup, args.clients = 2.0, 1.0, list(QUICK_CLIENTS)
  host = machine()
  configs = ([{"mode": "no batching", "inter_op": n} for n in (1, 2)]
             + [{**parse_setting(s), "inter_op": 2} for s in args.batch_settings.split(",")])
  rows = []
  with tempfile.TemporaryDirectory() as root:
    path = export_classifier(root)
    for i, config in enumerate(configs):
      out = os.path.join(root, f"rows-{i}.json")
      mode = {k: v for k, v in config.items() if k != "inter_op"}
      subprocess.run([sys.executable, os.path.abspath(__file__), f"--child={json.dumps(mode)}",
                      f"--path={path}", f"--out={out}", f"--threads={args.threads}",
                      f"--inter_op={config['inter_op']}", f"--seconds={args.seconds}",
                      f"--warmup={args.warmup}", f"--clients={','.join(map(str, args.clients))}"],
                     check=True, stdout=subprocess.DEVNULL,
                     env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
      rows.append((config, json.load(open(out))))
  print(f"\nall-MiniLM-L6-v2 classifier, classify_text on one dev-set movie review per request "
        f"(max_seq_length {SEQ_LENGTH}); {args.threads} intra-op threads; {args.seconds:g} s timed "
        f"after {args.warmup:g} s per N; closed-loop client threads in one process\n")
  for config, measured in rows:
    diff = measured[0]["max_abs_diff_vs_unbatched"]
    print(f"{describe(config)}" + (f" (max |prob diff| vs unbatched {diff:.1e})"
                                   if config["mode"] == "batching" else ""))
    print("\n| clients | requests/s | p50 (ms) | p99 (ms) | requests timed | mean batch "
          "| mean padded batch |")
    print("|---|---|---|---|---|---|---|")
    for r in measured:
      print(f"| {r['clients']} | {r['requests_per_s']:.1f} | {r['p50_ms']:.1f} | "
            f"{r['p99_ms']:.1f} | {r['requests']} | {r['mean_batch']:.2f} | "
            f"{r['mean_padded_batch']:.2f} |")
    print()
  for _, measured in rows:
    for r in measured:
      print(json.dumps(r))
  after = os.getloadavg()
  print(f"\nCPU: {host['cpu']}, {host['cores']} cores; amx_bf16 "
        f"{'yes' if host['amx_bf16'] else 'no'}, avx512_bf16 "
        f"{'yes' if host['avx512_bf16'] else 'no'}; load average (1, 5, 15 min) "
        f"{' '.join(f'{x:.2f}' for x in host['load_average'])} before, "
        f"{' '.join(f'{x:.2f}' for x in after)} after")
  print(f"commit {host['commit']}; command: python {' '.join(sys.argv)}")
  if args.print_params:
    batching = [(c, m[-1]) for c, m in rows if c["mode"] == "batching"]
    best, top = max(batching, key=lambda cm: (cm[1]["requests_per_s"], -cm[1]["p99_ms"]))
    print(f"\n# batching_parameters_file: the setting with the most requests/s at "
          f"{top['clients']} clients here ({top['requests_per_s']:.1f}/s, p99 "
          f"{top['p99_ms']:.1f} ms)")
    print(params_text(best))


if __name__ == "__main__":
  main()
