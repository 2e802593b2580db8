"""The whole path on a non-local file system: ram://, which every TensorFlow registers.

ram:// lives in this process's memory, so everything runs in one process: data built from
text, pretraining interrupted by an exception and resumed, the discriminator export,
fine-tuning from it and a SavedModel export. Every output must be on ram:// and nothing
in a local folder named `ram:` (what os.path made of such paths).
"""

import io
import json
import os
import random
import types
import uuid

import pytest
import tensorflow as tf

from electra_tf import filenames
from electra_tf.config import FinetuneConfig, PretrainConfig
from electra_tf.data import pretraining_data
from electra_tf.data.vocab import SPECIAL_TOKENS, load_vocab
from electra_tf.presets import get as get_preset
from electra_tf.tasks import runner
from electra_tf.training import callbacks, pretraining
from electra_tf.training.pretraining import TrainData

WORDS = [f"w{i}" for i in range(60)]


def _write(path: str, text: str) -> None:
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(text)


def _corpus(rng: random.Random) -> str:
  documents = []
  for _ in range(30):
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(4, 20))) for _ in range(rng.randint(2, 8))]
    documents.append("\n".join(lines))
  return "\n\n".join(documents) + "\n"


def _reviews(rng: random.Random) -> str:
  # Label 1 iff the text holds w0: learnable, though a few steps need not learn it.
  rows = ["sentence\tlabel"]
  for i in range(48):
    words = rng.choices(WORDS[1:], k=6) + (["w0"] if i % 2 else [])
    rows.append(f"{' '.join(words)}\t{i % 2}")
  return "\n".join(rows) + "\n"


class _Interrupt(Exception):
  pass


def _finetune_flags(root: str, init_checkpoint: str):
  return types.SimpleNamespace(
      strategy="one_device", tpu=None, cpu_devices=0, init_checkpoint=init_checkpoint,
      model_size="tiny", vocab_file=None, train_file=f"{root}/reviews.tsv",
      dev_file=f"{root}/reviews.tsv", text_columns=["sentence"], label_column="label",
      regression=False, max_train_examples=None, max_eval_examples=None,
      output_dir=f"{root}/finetuned", tfds_data_dir=None, cache_dir=None)


def test_build_pretrain_resume_export_and_finetune_all_on_ram(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)  # a relative `ram:` folder would appear here
  root = f"ram://e2e{uuid.uuid4().hex[:8]}"
  rng = random.Random(0)
  _write(f"{root}/text/corpus.txt", _corpus(rng))
  _write(f"{root}/vocab.txt", "".join(f"{t}\n" for t in (*SPECIAL_TOKENS, *WORDS)))
  _write(f"{root}/reviews.tsv", _reviews(rng))
  vocab = load_vocab(f"{root}/vocab.txt")
  assert vocab.path == f"{root}/vocab.txt"

  # Data: shards and manifest on ram://, the manifest naming the ram:// input.
  model_dir = f"{root}/run"
  data_dir = pretraining_data.build_if_needed(
      f"{root}/text/*.txt", vocab, f"{model_dir}/data", max_seq_length=32, show_progress=False)
  manifest = pretraining_data.read_manifest(data_dir)
  assert manifest.examples > 8 and manifest.inputs[0].path == f"{root}/text/corpus.txt"
  assert all(tf.io.gfile.exists(path) for path in manifest.shard_paths)
  assert pretraining_data.build_if_needed(f"{root}/text/*.txt", vocab, data_dir, 32,
                                          show_progress=False) == data_dir  # reused

  tiny = get_preset("tiny")
  config = tiny.replace(**{"model.vocab_size": vocab.size}, max_seq_length=32,
                        batch_size=4, num_train_steps=6, warmup_steps=2, checkpoint_steps=2,
                        steps_per_execution=1, log_steps=2, keep_checkpoints=5)
  assert isinstance(config, PretrainConfig)
  data = TrainData(manifest.shard_paths, vocab, manifest.examples, manifest.tokens)
  strategy = tf.distribute.get_strategy()

  # An exception right after the step-4 save stops the run; the rerun resumes there.
  save = callbacks.CheckpointSaver._save

  def save_then_fail(self, step):
    save(self, step)
    if step == 4:
      raise _Interrupt(f"stopped after saving step {step}")

  with monkeypatch.context() as patch:
    patch.setattr(callbacks.CheckpointSaver, "_save", save_then_fail)
    with pytest.raises(_Interrupt):
      pretraining.run_pretraining(config, data, model_dir, strategy, stream=io.StringIO(),
                                  fused_kernels=False)
  ckpt_dir = f"{model_dir}/{filenames.CHECKPOINT_SUBDIR}"
  assert tf.train.latest_checkpoint(ckpt_dir).endswith("ckpt-4")
  assert not tf.io.gfile.exists(f"{model_dir}/{filenames.DISCRIMINATOR_SUBDIR}")

  out = io.StringIO()
  result = pretraining.run_pretraining(config, data, model_dir, strategy, stream=out,
                                       fused_kernels=False)
  assert result.start_step == 4, out.getvalue()
  assert f"resumed from {ckpt_dir}/ckpt-4 at step 4" in out.getvalue()
  assert int(result.model.optimizer.iterations.numpy()) == 6
  assert tf.train.latest_checkpoint(ckpt_dir).endswith("ckpt-6")
  saved = json.loads(tf.io.gfile.GFile(f"{model_dir}/{filenames.CONFIG_NAME}").read())
  assert saved["pretrain"]["num_train_steps"] == 6
  assert tf.io.gfile.glob(f"{model_dir}/{filenames.TRAIN_LOGS}/events.out.tfevents.*")
  export = f"{model_dir}/{filenames.DISCRIMINATOR_SUBDIR}"
  assert sorted(tf.io.gfile.listdir(export)) == sorted(
      ["ckpt.data-00000-of-00001", "ckpt.index", "config.json", "vocab.txt",
       "vocab.tokenizer.json"])

  # Fine-tuning from the export, its vocab and table on ram://; then a SavedModel.
  def finetune_config(num_layers):
    return FinetuneConfig(task="classification", max_seq_length=16, batch_size=8,
                          eval_batch_size=16, num_train_epochs=1.0, learning_rate=1e-3)

  flags_ = _finetune_flags(root, export)
  finetuned = runner.run_from_flags(flags_, finetune_config, stream=io.StringIO())
  assert finetuned.best is not None
  best = f"{flags_.output_dir}/{filenames.BEST_SUBDIR}"
  assert tf.io.gfile.exists(f"{best}/{filenames.FINETUNE_RECORD}")
  assert tf.io.gfile.exists(f"{best}/{filenames.CKPT_NAME}.index")
  results = json.loads(tf.io.gfile.GFile(f"{flags_.output_dir}/{filenames.RESULTS_NAME}").read())
  assert results["best"]["epoch"] == 1

  from electra_tf.serving import saved_model

  version = saved_model.export_finetuned(best, f"{root}/serving")
  assert version == f"{root}/serving/1"
  served = tf.saved_model.load(version)
  outputs = served.signatures["classify_text"](text=tf.constant(["w0 w1 w2", "w3 w4"]))
  assert all(value.shape[0] == 2 for value in outputs.values())

  assert not os.path.exists("ram:") and os.listdir(tmp_path) == []
