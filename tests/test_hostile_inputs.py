"""Hostile inputs to every command, run as a user runs them (README, "Hostile inputs").

Each refused input must give exit code 2, no traceback, a last stderr line `error: ...` that
names the problem, and leave no output or temporary directory behind. Inputs that are valid
but unusual (mixed scripts and emoji, a 10 MB line, whitespace-only lines) must work.
Inputs already covered elsewhere are cited in the README table, not repeated here.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
from testing_utils import ROOT, assert_clear_error

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
COMMANDS = {
    "pretrain": [sys.executable, os.path.join(ROOT, "pretrain.py")],
    "build": [sys.executable, "-m", "electra_tf.commands.build_data"],
    "convert": [sys.executable, "-m", "electra_tf.commands.convert"],
    "finetune": [sys.executable, os.path.join(ROOT, "finetune.py")],
    "export": [sys.executable, "-m", "electra_tf.commands.export"],
}
# One document of plain English, one sentence a line.
TEXT = "The quick brown fox jumps over the dog.\n" * 40


def run(command, *args, timeout=300):
  return subprocess.run([*COMMANDS[command], *map(str, args)], cwd=ROOT, capture_output=True,
                        text=True, timeout=timeout, env=ENV)


def assert_no_temporaries(directory):
  leftovers = [f for f in os.listdir(directory) if ".tmp" in f or ".write-check" in f]
  assert not leftovers, leftovers


def assert_nothing_written(path):
  """`path` was not created, and no temporary name was left beside it."""
  path = str(path)
  assert not os.path.exists(path), os.listdir(path) if os.path.isdir(path) else path
  assert_no_temporaries(os.path.dirname(path))


def flip_bytes(path, count=16):
  """Corrupts `count` bytes in the middle of a file, keeping its size."""
  data = bytearray(open(path, "rb").read())
  for i in range(len(data) // 2, len(data) // 2 + count):
    data[i] ^= 0xFF
  open(path, "wb").write(bytes(data))


def truncate_half(path):
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


def edit_json(path, edit):
  with open(path, encoding="utf-8") as f:
    values = json.load(f)
  values = edit(values) or values
  with open(path, "w", encoding="utf-8") as f:
    json.dump(values, f)


def copy(src, dst):
  shutil.copytree(src, dst)
  return dst


# ---------------------------------------------------------------------------------------------
# Fixtures: real data, checkpoints and a fine-tuned model, built in this process once.


@pytest.fixture(scope="module")
def root(tmp_path_factory):
  root = tmp_path_factory.mktemp("hostile")
  (root / "a_file").write_text("not a directory\n")
  return root


@pytest.fixture(scope="module")
def data_64(root):
  """Pretraining data (built-in corpus, 4 articles) at max_seq_length 64, two shards."""
  from electra_tf.data import builtin, pretraining_data, vocab

  corpus = builtin.builtin_corpus(str(root / "cache"), max_articles=4)
  out = str(root / "data")
  pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), out,
                                          max_seq_length=64, num_workers=1, min_shards=2,
                                          show_progress=False)
  return out


@pytest.fixture(scope="module")
def discriminator(root):
  """A discriminator export of the tiny preset, as pretrain.py writes it (random weights)."""
  from electra_tf import presets
  from electra_tf.checkpoints import native
  from electra_tf.data import vocab
  from electra_tf.model import networks

  model = networks.Discriminator(presets.get("tiny").model)
  model(networks.dummy_inputs())
  return native.save_discriminator(model, vocab.builtin_vocab_path(),
                                      str(root / "discriminator"))


@pytest.fixture(scope="module")
def hf_folder(root, discriminator):
  from electra_tf.checkpoints import converter

  return os.path.join(converter.export_hf(discriminator, str(root / "hf")), "discriminator")


@pytest.fixture(scope="module")
def tf1_checkpoint(root, discriminator):
  """The same weights as an authors'-layout (name-based) TF1 checkpoint."""
  import tensorflow as tf

  from electra_tf.checkpoints import converter, names

  tensors = names.extract(None, converter.load(discriminator).discriminator)
  prefix = str(root / "tf1" / "model.ckpt")
  keys = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=keys, shape_and_slices=[""] * len(keys),
                    tensors=[tf.constant(tensors[k]) for k in keys])
  return prefix


@pytest.fixture(scope="module")
def finetuned(root):
  """A fine-tuned classifier directory (tiny encoder, random weights), as finetune.py's best/."""
  import dataclasses

  from electra_tf import presets
  from electra_tf.config import FinetuneConfig
  from electra_tf.data import vocab
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task
  from electra_tf.tasks.classification_data import TaskSpec
  from electra_tf.training.finetuning import save_finetuned

  encoder = presets.get("tiny").model
  config = FinetuneConfig(task="classification", max_seq_length=32)
  spec = TaskSpec("classification", ("text",), "label", ("neg", "pos"), ("accuracy",),
                  "accuracy")
  model = build_finetune_model(model_for_task(config, encoder, num_labels=2))
  record = {"task": "classification", "encoder": encoder.to_dict(),
            "finetune": config.to_dict(), "init_checkpoint": None,
            "spec": dataclasses.asdict(spec), "max_seq_length": 32, "lower_case": True}
  return save_finetuned(model, record, vocab.builtin_vocab_path(), str(root / "finetuned"))


def ckpt_data(directory):
  return os.path.join(directory, "ckpt.data-00000-of-00001")


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


# ---------------------------------------------------------------------------------------------
# electra-convert


def _ours(tmp_path, source, damage):
  bad = copy(source, tmp_path / "ckpt")
  damage(bad)
  return ["--to=hf", f"--input={bad}"]


def _hf(tmp_path, source, damage):
  bad = copy(source, tmp_path / "hf")
  damage(bad)
  return ["--from=hf", f"--input={bad}"]


def _tf1(tmp_path, source, damage):
  shutil.copytree(os.path.dirname(source), tmp_path / "tf1")
  bad = tmp_path / "tf1" / os.path.basename(source)
  damage(f"{bad}.data-00000-of-00001")
  return ["--from=tf1", f"--input={bad}"]


def _encoder_json(change):
  return lambda d: edit_json(f"{d}/config.json", lambda c: c["encoder"].update(change))


# case: (source fixture, args from (tmp_path, source), needles)
CONVERT_REFUSED = {
    "truncated_checkpoint": (
        "discriminator", lambda t, s: _ours(t, s, lambda d: truncate_half(ckpt_data(d))),
        ["cannot read the checkpoint", "Read less bytes than requested", "truncated or corrupt"]),
    "corrupted_checkpoint": (
        "discriminator", lambda t, s: _ours(t, s, lambda d: flip_bytes(ckpt_data(d))),
        ["cannot read the checkpoint", "Checksum does not match", "truncated or corrupt"]),
    "config_json_wrong_type": (
        "discriminator", lambda t, s: _ours(t, s, _encoder_json({"hidden_size": "64"})),
        ["config.json encoder: hidden_size must be int, got '64'"]),
    "hf_truncated_safetensors": (
        "hf_folder", lambda t, s: _hf(t, s, lambda d: truncate_half(f"{d}/model.safetensors")),
        ["cannot read", "model.safetensors", "incomplete metadata"]),
    "hf_config_wrong_type": (
        "hf_folder", lambda t, s: _hf(t, s, lambda d: edit_json(
            f"{d}/config.json", lambda c: c.update(num_hidden_layers="2"))),
        ["config.json: num_hidden_layers must be int, got '2'"]),
    "tf1_truncated_checkpoint": (
        "tf1_checkpoint", lambda t, s: _tf1(t, s, truncate_half),
        ["cannot read the checkpoint", "model.ckpt", "truncated or corrupt"]),
}


@pytest.mark.parametrize("case", list(CONVERT_REFUSED))
def test_convert_refuses(tmp_path, request, case):
  fixture, make_args, needles = CONVERT_REFUSED[case]
  args = make_args(tmp_path, request.getfixturevalue(fixture))
  assert_clear_error(run("convert", *args, f"--output={tmp_path}/out"), *needles)
  assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize("args,needles", [
    (["--output=ROOT/a_file/out"], ["--output", "a_file is a file, not a directory"]),
    (["--output=/proc/electra_out"], ["--output /proc/electra_out cannot be created"]),
    (["--output=TMP/out", "--num_heads=0"], ["--num_heads must be positive, got 0"]),
    (["--output=TMP/out", "--from=pytorch"], ["--from", "pytorch"]),
], ids=["output_under_a_file", "output_under_proc", "zero_num_heads", "unknown_format"])
def test_convert_refuses_bad_usage_at_once(tmp_path, root, args, needles):
  args = [a.replace("ROOT", str(root)).replace("TMP", str(tmp_path)) for a in args]
  result = run("convert", "--from=hf", f"--input={tmp_path}", *args)  # a later flag wins
  assert_clear_error(result, *needles)
  assert_nothing_written(tmp_path / "out")
  assert_no_temporaries(root)


# ---------------------------------------------------------------------------------------------
# python finetune.py


def _tsv(tmp_path, content: bytes):
  (tmp_path / "train.tsv").write_bytes(content)
  return ["--task=classification", f"--train_file={tmp_path}/train.tsv", "--text_columns=text"]


def _squad(tmp_path, content: str):
  (tmp_path / "train.json").write_text(content, encoding="utf-8")
  return ["--task=squad_v1.1", f"--train_file={tmp_path}/train.json", "--max_seq_length=64",
          "--max_query_length=16", "--doc_stride=32"]


def _jsonl(tmp_path, rows):
  (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  return ["--task=classification", f"--train_file={tmp_path}/train.jsonl", "--text_columns=text"]


FINETUNE_REFUSED = {
    "tsv_with_a_nul_byte": (lambda t: _tsv(t, b"text\tlabel\ngood\tpos\nba\x00d\tneg\n"),
                            ["train.tsv line 3 holds a NUL byte", "binary file"]),
    "tsv_only_whitespace": (lambda t: _tsv(t, b"  \n\t\n   \n"),
                            ["train.tsv is empty (only whitespace)"]),
    "jsonl_wrong_types": (lambda t: _jsonl(t, [{"text": 5, "label": "pos"},
                                               {"text": "fine", "label": "neg"}]),
                          ["train.jsonl line 1: 'text' must be text, got 5"]),
    "squad_without_questions": (lambda t: _squad(t, '{"data": []}'),
                                ["train.json holds no usable training questions"]),
    "squad_file_is_a_directory": (lambda t: [*_squad(t, "{}"), f"--train_file={t}"],
                                  ["is a directory; pass the SQuAD JSON file"]),
}


@pytest.mark.parametrize("case", list(FINETUNE_REFUSED))
def test_finetune_refuses(tmp_path, case):
  make_args, needles = FINETUNE_REFUSED[case]
  result = run("finetune", *make_args(tmp_path), f"--output_dir={tmp_path}/out")
  assert_clear_error(result, *needles)
  assert_nothing_written(tmp_path / "out")


def test_finetune_refuses_a_truncated_init_checkpoint(tmp_path, discriminator):
  bad = copy(discriminator, tmp_path / "init")
  truncate_half(ckpt_data(bad))
  result = run("finetune", *_tsv(tmp_path, b"text\tlabel\ngood\tpos\nbad\tneg\n"),
               f"--init_checkpoint={bad}", f"--output_dir={tmp_path}/out")
  assert_clear_error(result, "cannot read the checkpoint", "truncated or corrupt")
  assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize("args,needles", [
    (["--batch_size=0"], ["batch_size must be positive, got 0"]),
    (["--num_train_epochs=-1"], ["num_train_epochs must be positive, got -1.0"]),
    (["--max_seq_length=0"], ["max_seq_length must be positive, got 0"]),
    (["--max_train_examples=-1"], ["--max_train_examples must be 1 or more, got -1"]),
    (["--output_dir=ROOT/a_file/out"], ["--output_dir", "a_file is a file, not a directory"]),
    (["--export_dir=/proc/serving"], ["--export_dir /proc/serving cannot be created"]),
    (["runs/out"], ["unexpected arguments ['runs/out']"]),
], ids=["zero_batch_size", "negative_epochs", "zero_max_seq_length",
        "negative_max_train_examples", "output_under_a_file", "export_dir_under_proc",
        "stray_argument"])
def test_finetune_refuses_bad_settings_at_once(tmp_path, root, args, needles):
  args = [a.replace("ROOT", str(root)) for a in args]
  result = run("finetune", "--task=movie_reviews", f"--output_dir={tmp_path}/out", *args)
  assert_clear_error(result, *needles)
  assert_nothing_written(tmp_path / "out")
  assert_no_temporaries(root)


def _train_classifier(tmp_path, rows):
  (tmp_path / "train.tsv").write_text("text\tlabel\n" + "".join(f"{r}\n" for r in rows),
                                      encoding="utf-8")
  return run("finetune", "--task=classification", f"--train_file={tmp_path}/train.tsv",
             "--text_columns=text", "--max_seq_length=16", "--batch_size=2",
             "--num_train_epochs=1", "--log_steps=1", f"--output_dir={tmp_path}/out")


def test_finetune_works_on_mixed_scripts_and_emoji(tmp_path):
  """Every row is read whole, including U+2028 and U+0085 inside a field (which
  str.splitlines() would treat as line ends), and training runs."""
  result = _train_classifier(tmp_path, [
      "Ein schöner Film 😀 مرحبا بالعالم\tpos", "这部电影很糟糕 👎🏽 очень плохо\tneg",
      "नमस्ते दुनिया 🎬 great\u2028film\tpos", "\u200b 👨‍👩‍👧 ζωή\u0085 καλή\tneg"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "fine-tuning classification: 4 training examples" in result.stdout, result.stdout
  assert "step 2/2" in result.stdout, result.stdout
  assert os.path.isfile(tmp_path / "out" / "checkpoints" / "checkpoint")


def test_finetune_works_on_a_10_mb_line(tmp_path):
  """One 10 MB review: read (above csv's 128 KB field limit), tokenized and truncated to
  --max_seq_length."""
  long = " ".join(f"word{i % 50}" for i in range(1_500_000))
  assert len(long) > 10_000_000
  result = _train_classifier(tmp_path, [f"{long}\tpos", "bad film\tneg", "ok film\tpos",
                                        "awful\tneg"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "fine-tuning classification: 4 training examples" in result.stdout, result.stdout
  assert os.path.isfile(tmp_path / "out" / "checkpoints" / "checkpoint")


# ---------------------------------------------------------------------------------------------
# electra-export


EXPORT_REFUSED = {
    "truncated_checkpoint": (lambda d: truncate_half(ckpt_data(d)),
                             ["cannot read the checkpoint", "truncated or corrupt"]),
    "corrupted_checkpoint": (lambda d: flip_bytes(ckpt_data(d)),
                             ["Checksum does not match", "truncated or corrupt"]),
    "finetune_json_truncated": (
        lambda d: open(f"{d}/finetune.json", "r+").truncate(40),
        ["cannot read", "finetune.json", "restore it or fine-tune again"]),
    "finetune_json_wrong_type": (
        lambda d: edit_json(f"{d}/finetune.json", lambda r: r["finetune"].update(batch_size="32")),
        ["finetune.json finetune: batch_size must be int, got '32'"]),
}


@pytest.mark.parametrize("case", list(EXPORT_REFUSED))
def test_export_refuses(tmp_path, finetuned, case):
  damage, needles = EXPORT_REFUSED[case]
  bad = copy(finetuned, tmp_path / "best")
  damage(bad)
  result = run("export", f"--checkpoint={bad}", f"--export_dir={tmp_path}/serving")
  assert_clear_error(result, *needles)
  assert_nothing_written(tmp_path / "serving")


@pytest.mark.parametrize("args,needles", [
    (["--checkpoint=TMP/nowhere"], ["--checkpoint", "nowhere does not exist"]),
    (["--export_dir=ROOT/a_file/serving"], ["--export_dir", "a_file is a file, not a directory"]),
    (["--export_dir=/proc/serving"], ["--export_dir /proc/serving cannot be created"]),
], ids=["missing_checkpoint", "export_dir_under_a_file", "export_dir_under_proc"])
def test_export_refuses_bad_paths_at_once(tmp_path, root, args, needles):
  args = [a.replace("ROOT", str(root)).replace("TMP", str(tmp_path)) for a in args]
  result = run("export", f"--checkpoint={root}", f"--export_dir={tmp_path}/serving",
               *args)  # a later flag wins
  assert_clear_error(result, *needles)
  assert_nothing_written(tmp_path / "serving")
  assert_no_temporaries(root)
