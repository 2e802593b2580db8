"""Hostile inputs to electra-build-data and pretrain.py, run as a user runs them.

Each refused input must give exit code 2, no traceback, a last stderr line `error: ...` that
names the problem, and leave no output or temporary directory behind. Inputs that are valid
but unusual (mixed scripts and emoji, a 10 MB line, whitespace-only lines) must work.
Inputs already covered by other tests are listed in docs/errors.md ("How these are
checked"), not repeated here.
"""

import os

import pytest
from hostile_utils import (
  TEXT,
  assert_no_temporaries,
  assert_nothing_written,
  copy,
  edit_json,
  flip_bytes,
  run,
)
from testing_utils import assert_clear_error

# ---------------------------------------------------------------------------------------------
# electra-build-data


def _utf16(tmp_path, root):
  (tmp_path / "utf16.txt").write_bytes(TEXT.encode("utf-16"))
  return [f"--input_files={tmp_path}/utf16.txt"]


def _binary_vocab(tmp_path, root):
  (tmp_path / "vocab.bin").write_bytes(b"[PAD]\n[UNK]\x00\x01\x7fELF\n" * 10)
  return [f"--vocab_file={tmp_path}/vocab.bin"]


BUILD_REFUSED = {
    "utf16_text": (_utf16, ["is UTF-16", "re-encode"]),
    "binary_vocab": (_binary_vocab, ["vocab.bin: NUL byte", "binary file"]),
    "negative_num_workers": (lambda t, r: ["--num_workers=-1"], ["--num_workers=-1 is negative"]),
    "zero_min_shards": (lambda t, r: ["--min_shards=0"], ["--min_shards=0 must be 1 or more"]),
    "non_integer_size": (lambda t, r: ["--max_seq_length=12.5"],
                         ["--max_seq_length=12.5", "invalid literal for int()"]),
    "output_under_a_file": (lambda t, r: [f"--output_dir={r}/a_file/data"],
                            ["cannot be created", "a_file is a file, not a directory"]),
    "output_under_proc": (lambda t, r: ["--output_dir=/proc/electra_data"],
                          ["--output_dir /proc/electra_data cannot be created",
                           "nothing can be written in /proc"]),
    "stray_argument": (lambda t, r: ["data/"], ["unexpected arguments ['data/']"]),
}


@pytest.mark.parametrize("case", list(BUILD_REFUSED))
def test_build_data_refuses(tmp_path, root, case):
  make_args, needles = BUILD_REFUSED[case]
  (tmp_path / "corpus.txt").write_text(TEXT, encoding="utf-8")
  args = [f"--input_files={tmp_path}/corpus.txt", f"--output_dir={tmp_path}/out",
          "--max_seq_length=32", *make_args(tmp_path, root)]  # a later flag wins
  assert_clear_error(run("build", *args), *needles)
  assert_nothing_written(tmp_path / "out")
  assert os.path.isfile(root / "a_file")
  assert_no_temporaries(root)


def test_build_data_works_on_mixed_scripts_emoji_and_whitespace_lines(tmp_path):
  """Scripts, emoji (with ZWJ and skin tones), combining marks, zero-width and NBSP characters,
  U+2028 inside a line, and whitespace-only lines between sentences: the whitespace lines end
  documents, the rest is tokenized; what the vocab lacks becomes [UNK]."""
  import tensorflow as tf

  from electra_tf.data import manifest, vocab

  text = ("Ein schöner Film über Zürich 😀 and naïve café crème.\n"
          "Это очень хороший фильм, мир.\n"
          "   \n"
          "Ελληνικά κείμενα και ζωή.\t \n"
          "这部电影很好看 👍🏽 日本語のテキスト。\n"
          "\t\n"
          "مرحبا بالعالم — שלום עולם\n"
          "नमस्ते दुनिया 🎬 ไทย ภาษา\n"
          " \u3000\n"
          "Family \U0001F468\u200d\U0001F469\u200d\U0001F467 e\u0301 combining, "
          "zero\u200bwidth, line\u2028separator, NBSP\u00a0here.\n")
  (tmp_path / "mixed.txt").write_text(text, encoding="utf-8")
  out = tmp_path / "data"
  result = run("build", f"--input_files={tmp_path}/mixed.txt", f"--output_dir={out}",
               "--max_seq_length=32")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  built = manifest.read_manifest(str(out))
  assert built.documents == 4 and built.examples >= 4, built
  tokens = vocab.load_vocab(vocab.builtin_vocab_path()).tokens
  seen = set()
  for shard in built.shard_paths:
    for record in tf.data.TFRecordDataset(shard):
      example = tf.train.Example.FromString(record.numpy())
      seen.update(tokens[i] for i in example.features.feature["input_ids"].int64_list.value)
  # Latin (accents stripped), Cyrillic, Greek, CJK, Hebrew, Arabic and Devanagari pieces all
  # survive; the emoji become [UNK].
  for token in ("zurich", "cafe", "м", "ε", "日", "ש", "م", "न", "family", "[UNK]"):
    assert token in seen, (token, sorted(seen))
  assert sorted(os.listdir(tmp_path)) == ["data", "mixed.txt"]


# ---------------------------------------------------------------------------------------------
# python pretrain.py


def _gzip_text(tmp_path, root):
  import gzip

  (tmp_path / "corpus.txt.gz").write_bytes(gzip.compress(TEXT.encode()))
  return [f"--text_files={tmp_path}/corpus.txt.gz"]


def _text_as_records(tmp_path, root):
  (tmp_path / "shard.tfrecord").write_text(TEXT)
  return [f"--train_data={tmp_path}/shard.tfrecord"]


PRETRAIN_REFUSED = {
    "gzip_as_text": (_gzip_text, ["corpus.txt.gz: NUL byte", "binary file"]),
    "text_as_tfrecord": (_text_as_records, ["shard.tfrecord is not a TFRecord file"]),
    "missing_train_data": (lambda t, r: [f"--train_data={t}/nowhere"],
                           ["no files match", "nowhere"]),
    "negative_batch_size": (lambda t, r: ["--batch_size=-8"],
                            ["batch_size must be positive, got -8"]),
    "zero_max_seq_length": (lambda t, r: ["--max_seq_length=0"],
                            ["max_seq_length must be positive, got 0"]),
    "negative_learning_rate": (lambda t, r: ["--learning_rate=-1"],
                               ["learning_rate must be positive"]),
    "zero_steps_per_execution": (lambda t, r: ["--steps_per_execution=0"],
                                 ["steps_per_execution must be positive, got 0"]),
}


@pytest.mark.parametrize("case", list(PRETRAIN_REFUSED))
def test_pretrain_refuses(tmp_path, root, case):
  make_args, needles = PRETRAIN_REFUSED[case]
  result = run("pretrain", f"--model_dir={tmp_path}/run", *make_args(tmp_path, root))
  assert_clear_error(result, *needles)
  assert_nothing_written(tmp_path / "run")


def test_pretrain_refuses_a_manifest_with_wrong_types(tmp_path, data_64):
  data = copy(data_64, tmp_path / "data")
  edit_json(data / "manifest.json", lambda m: m.update(max_seq_length="64"))
  result = run("pretrain", f"--model_dir={tmp_path}/run", f"--train_data={data}")
  assert_clear_error(result, "manifest.json: max_seq_length must be int, got '64'",
                     "rebuild the data")
  assert_nothing_written(tmp_path / "run")


def test_pretrain_names_the_key_of_a_config_override_with_the_wrong_type(tmp_path):
  result = run("pretrain", f"--model_dir={tmp_path}/run",
               '--config_overrides={"num_train_steps": "ten"}')
  assert_clear_error(result, "num_train_steps")
  assert_nothing_written(tmp_path / "run")


def test_pretrain_refuses_a_model_dir_under_a_file(root, data_64):
  result = run("pretrain", f"--model_dir={root}/a_file/run", f"--train_data={data_64}")
  assert_clear_error(result, "--model_dir", "a_file is a file")


def test_pretrain_names_a_corrupted_record(tmp_path, data_64):
  data = copy(data_64, tmp_path / "data")
  flip_bytes(data / "shard-00000.tfrecord")
  result = run("pretrain", f"--model_dir={tmp_path}/run", f"--train_data={data}",
               "--num_train_steps=200", "--batch_size=2", "--steps_per_execution=1",
               "--log_steps=1000", "--checkpoint_steps=1000")
  assert not os.path.exists(tmp_path / "run" / "checkpoints" / "checkpoint")
  assert_clear_error(result, "corrupted record at")
