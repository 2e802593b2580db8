"""Hostile inputs to electra-convert, finetune.py and electra-export, run as a user runs them.

Each refused input must give exit code 2, no traceback, a last stderr line `error: ...` that
names the problem, and leave no output or temporary directory behind. Inputs that are valid
but unusual (mixed scripts and emoji, a 10 MB line, whitespace-only lines) must work.
Inputs already covered by other tests are listed in docs/errors.md ("How these are
checked"), not repeated here.
"""

import json
import os
import shutil

import pytest
from hostile_utils import (
  assert_no_temporaries,
  assert_nothing_written,
  ckpt_data,
  copy,
  edit_json,
  flip_bytes,
  run,
  truncate_half,
)
from testing_utils import assert_clear_error

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
