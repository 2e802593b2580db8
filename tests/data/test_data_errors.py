"""Bad inputs to the data builder: one clear UserError, nothing half-written, CLI exit 2."""

import os
import re

import pytest
from testing_utils import run_command

from electra_tf.data.pretraining_data import build_pretraining_data
from electra_tf.data.vocab import SPECIAL_TOKENS
from electra_tf.errors import UserError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _build(inputs, vocab, out, **kwargs):
  return build_pretraining_data(inputs, vocab, str(out), max_seq_length=32, num_workers=1,
                                show_progress=False, **kwargs)


def _assert_nothing_written(out):
  parent = os.path.dirname(str(out))
  assert not os.path.exists(out)
  assert not [f for f in os.listdir(parent) if ".tmp-" in f], os.listdir(parent)


def test_no_files_match(tmp_path, toy_vocab):
  with pytest.raises(UserError, match=re.escape(
      f"no files match '{tmp_path}/corpus/*.txt' (--input_files); check the path")):
    _build(f"{tmp_path}/corpus/*.txt", toy_vocab, tmp_path / "out")


@pytest.mark.parametrize("content, message", [
    (b"", "the files are empty"),
    (b"   \n\n\t\n  \n", "only blank lines or whitespace"),
])
def test_no_text(tmp_path, toy_vocab, content, message):
  (tmp_path / "a.txt").write_bytes(content)
  with pytest.raises(UserError, match=f"^no text in .*a.txt: {message}; give UTF-8 text"):
    _build(str(tmp_path / "a.txt"), toy_vocab, tmp_path / "out")
  _assert_nothing_written(tmp_path / "out")


def test_invalid_utf8_names_file_and_byte(tmp_path, toy_vocab):
  good = "w1 w2 w3\n" * 2000  # past the first block and batch
  path = tmp_path / "latin1.txt"
  path.write_bytes(good.encode() + "w4 café\n".encode("latin-1"))
  offset = len(good) + len("w4 caf")
  with pytest.raises(UserError) as error:
    _build(str(path), toy_vocab, tmp_path / "out")
  assert str(error.value) == (f"{path}: invalid UTF-8 at byte {offset}; "
                              "re-encode the file as UTF-8")
  _assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize("prefix", [b"", b"w1 w2\n" * 5000])  # caught early / while reading
def test_binary_file(tmp_path, toy_vocab, prefix):
  path = tmp_path / "data.bin"
  path.write_bytes(prefix + b"\x1f\x8b\x08\x00\x00\x00binary")
  with pytest.raises(UserError, match=re.escape(
      f"{path}: NUL byte at byte {len(prefix) + 3}; this looks like a binary file")):
    _build(str(path), toy_vocab, tmp_path / "out")
  _assert_nothing_written(tmp_path / "out")


def test_vocab_without_mask(tmp_path, toy_corpus):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("".join(f"{t}\n" for t in SPECIAL_TOKENS if t != "[MASK]") + "w1\n")
  with pytest.raises(UserError, match=re.escape(
      "vocab.txt has no [MASK] token; use a BERT-style WordPiece vocab or build one with "
      "electra-learn-vocab")):
    _build(toy_corpus, str(vocab), tmp_path / "out")


def test_existing_output_needs_overwrite(tmp_path, toy_corpus, toy_vocab):
  out = tmp_path / "out"
  first = _build(toy_corpus, toy_vocab, out, seed=1)
  with pytest.raises(UserError, match="already holds pretraining data; pass --overwrite"):
    _build(toy_corpus, toy_vocab, out, seed=2)
  second = _build(toy_corpus, toy_vocab, out, seed=2, overwrite=True)
  assert second.seed == 2 and first.examples > 0
  assert sorted(os.listdir(tmp_path)) == ["out"]


def test_foreign_output_dir_is_never_replaced(tmp_path, toy_corpus, toy_vocab):
  out = tmp_path / "mine"
  out.mkdir()
  (out / "notes.txt").write_text("keep me")
  with pytest.raises(UserError, match="is not a pretraining data dir"):
    _build(toy_corpus, toy_vocab, out, overwrite=True)
  assert (out / "notes.txt").read_text() == "keep me"


def test_tiny_max_seq_length(tmp_path, toy_corpus, toy_vocab):
  with pytest.raises(UserError, match="--max_seq_length=4 is too small"):
    build_pretraining_data(toy_corpus, toy_vocab, str(tmp_path / "o"), max_seq_length=4)


def _cli(*args):
  return run_command("build_data", *args, timeout=300)


def test_cli_bad_vocab_exits_2_with_one_line(tmp_path, toy_corpus):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nw1\n")
  result = _cli(f"--input_files={toy_corpus}", f"--vocab_file={vocab}",
                f"--output_dir={tmp_path / 'out'}")
  assert result.returncode == 2
  assert result.stderr.splitlines() == [
      "error: vocab.txt has no [MASK] token; use a BERT-style WordPiece vocab or build one "
      "with electra-learn-vocab"]
  _assert_nothing_written(tmp_path / "out")


def test_cli_bad_text_exits_2_then_good_text_builds(tmp_path, toy_vocab_path):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("w1 w2 w3\nw4 w5\n\nw6 w7\n")
  (corpus / "b.txt").write_bytes(b"w1 w2\nw3 \xff\xfe w4\n")
  out = tmp_path / "out"
  args = [f"--input_files={corpus}/*.txt", f"--vocab_file={toy_vocab_path}",
          f"--output_dir={out}", "--max_seq_length=16"]
  result = _cli(*args)
  assert result.returncode == 2, result.stderr
  # The toy vocab has no settings beside it: they are inferred and said in one line.
  assert result.stderr.splitlines() == [
      f"no tokenizer settings beside {toy_vocab_path}: inferred from its tokens (wordpiece, "
      "lower_case=True, strip_accents=True, split_cjk=True)",
      f"error: {corpus}/b.txt: invalid UTF-8 at byte 9; re-encode the file as UTF-8"]
  _assert_nothing_written(out)

  (corpus / "b.txt").write_text("w1 w2\nw3 w4\n")
  result = _cli(*args)
  assert result.returncode == 0, result.stderr
  assert re.fullmatch(r"wrote \d+ examples \(\d+ tokens\) from 3 documents to 1 shard\(s\), "
                      r".*\n", result.stdout)
  assert os.path.isfile(out / "manifest.json")
