"""build_pretraining_data end to end: records, manifest, determinism, workers, long lines."""

import filecmp
import os

import pytest
import tensorflow as tf
from toy_data import NUM_DOCUMENTS, WORDS_PER_DOCUMENT, write_corpus

from electra_tf import features
from electra_tf.data import io_utils
from electra_tf.data.manifest import read_manifest
from electra_tf.data.pretraining_data import build_pretraining_data, plan_units
from electra_tf.data.tokenizer_spec import TokenizerSpec
from electra_tf.errors import UserError

L = 64


def read_records(manifest):
  """{key: list of int lists} for every record of a data dir, in shard order."""
  rows = []
  for path in manifest.shard_paths:
    for raw in tf.data.TFRecordDataset(path):
      feature = tf.train.Example.FromString(raw.numpy()).features.feature
      rows.append({k: list(feature[k].int64_list.value) for k in features.RECORD_KEYS})
  return rows


@pytest.fixture(scope="module")
def toy_build(tmp_path_factory, toy_corpus, toy_vocab):
  out = str(tmp_path_factory.mktemp("build") / "data")
  manifest = build_pretraining_data(toy_corpus, toy_vocab, out, max_seq_length=L,
                                    num_workers=1, min_shards=3, seed=7, show_progress=False)
  return manifest


def test_records_are_padded_packed_and_stay_in_their_document(toy_build, toy_vocab):
  rows = read_records(toy_build)
  assert len(rows) == toy_build.examples > 100
  specials = {toy_vocab.cls_id, toy_vocab.sep_id}
  for row in rows:
    ids, mask, segments = row[features.INPUT_IDS], row[features.INPUT_MASK], \
        row[features.SEGMENT_IDS]
    assert len(ids) == len(mask) == len(segments) == L
    n = sum(mask)
    assert mask == [1] * n + [0] * (L - n)
    assert ids[n:] == [0] * (L - n) and segments[n:] == [0] * (L - n)
    assert ids[0] == toy_vocab.cls_id and ids[n - 1] == toy_vocab.sep_id
    assert segments[:n] == sorted(segments[:n])
    words = [toy_vocab.tokens[i] for i in ids[:n] if i not in specials]
    assert toy_vocab.unk_id not in ids
    documents = {int(w[1:]) // WORDS_PER_DOCUMENT for w in words}
    assert len(documents) == 1, f"an example spans documents {documents}"


def test_manifest_describes_the_build(toy_build, toy_vocab, toy_corpus):
  manifest = read_manifest(toy_build.data_dir)
  assert manifest == toy_build
  rows = read_records(manifest)
  assert manifest.documents == NUM_DOCUMENTS + NUM_DOCUMENTS // 2
  assert manifest.examples == len(rows)
  assert manifest.tokens == sum(sum(r[features.INPUT_MASK]) for r in rows)
  assert (manifest.vocab_md5, manifest.vocab_size) == (toy_vocab.md5, toy_vocab.size)
  assert (manifest.spec(), manifest.max_seq_length, manifest.seed) == (TokenizerSpec(), L, 7)
  assert len(manifest.shards) == 3
  for shard, path in zip(manifest.shards, manifest.shard_paths, strict=True):
    assert shard.bytes == os.path.getsize(path)
    assert shard.records == sum(1 for _ in tf.data.TFRecordDataset(path))
  inputs = io_utils.expand_patterns(toy_corpus)
  assert [i.path for i in manifest.inputs] == [os.path.abspath(p) for p in inputs]
  assert [i.bytes for i in manifest.inputs] == [os.path.getsize(p) for p in inputs]
  # Nothing is left behind beside the output: no staging dirs.
  assert os.listdir(os.path.dirname(manifest.data_dir)) == ["data"]


def test_same_seed_same_bytes_other_seed_differs(tmp_path, toy_corpus, toy_vocab, toy_build):
  again = build_pretraining_data(toy_corpus, toy_vocab, str(tmp_path / "again"),
                                 max_seq_length=L, num_workers=1, min_shards=3, seed=7,
                                 show_progress=False)
  for a, b in zip(toy_build.shard_paths, again.shard_paths, strict=True):
    assert filecmp.cmp(a, b, shallow=False)
  other = build_pretraining_data(toy_corpus, toy_vocab, str(tmp_path / "other"),
                                 max_seq_length=L, num_workers=1, min_shards=3, seed=8,
                                 show_progress=False)
  assert not all(filecmp.cmp(a, b, shallow=False)
                 for a, b in zip(toy_build.shard_paths, other.shard_paths, strict=True))


def test_worker_processes_write_the_same_data(tmp_path, toy_corpus, toy_vocab, toy_build,
                                              capfd):
  """Two spawned workers produce exactly the in-process shards of the same plan."""
  parallel = build_pretraining_data(toy_corpus, toy_vocab, str(tmp_path / "parallel"),
                                    max_seq_length=L, num_workers=2, min_shards=3, seed=7)
  assert parallel.num_workers == 2
  for a, b in zip(toy_build.shard_paths, parallel.shard_paths, strict=True):
    assert filecmp.cmp(a, b, shallow=False)
  progress = capfd.readouterr().err.strip().splitlines()[-1]
  assert "60 documents" in progress and "MB/s" in progress and "ETA" in progress


def test_plan_cuts_only_at_document_ends(tmp_path):
  documents = [f"doc{d} line one\ndoc{d} line two" for d in range(50)]
  files = []
  for name in ("a.txt", "b.txt"):
    (tmp_path / name).write_text("\n\n".join(documents) + "\n")
    files.append(str(tmp_path / name))
  units = plan_units(files, 7)
  assert len(units) == 7
  data = (tmp_path / "a.txt").read_bytes()
  ranges = {path: [] for path in files}
  for unit in units:
    for path, start, end in unit:
      assert start == 0 or data[start - 2:start] == b"\n\n"  # a document starts here
      ranges[path].append((start, end))
  for path in files:  # every byte of every file in exactly one unit, in order
    starts_ends = sorted(ranges[path])
    assert starts_ends[0][0] == 0 and starts_ends[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(starts_ends, starts_ends[1:], strict=False))


def test_long_lines_are_cut_at_spaces_within_the_limit(tmp_path):
  path = tmp_path / "long.txt"
  line = " ".join(f"w{i % 1000}" for i in range(30000))
  path.write_text(f"short\n{line}\n{'é' * 50000}\n")
  pieces = list(io_utils.iter_raw_lines(str(path), max_line_bytes=4096))
  assert pieces[0] == (0, b"short")
  assert all(len(raw) <= 4096 for _, raw in pieces)
  assert b"".join(raw for _, raw in pieces[1:-25]) == line.encode()
  assert all(raw.endswith(b" ") for _, raw in pieces[1:-26])  # never inside a word
  accents = b"".join(raw for _, raw in pieces[-25:])
  assert accents.decode("utf-8") == "é" * 50000  # cut between characters only
  offsets = [offset for offset, _ in pieces]
  assert offsets == sorted(offsets) and pieces[1][0] == 6


def test_ten_megabyte_line_is_packed_in_full(tmp_path, toy_vocab):
  path = tmp_path / "one_line.txt"
  words = [f"w{i % 2000}" for i in range(2_000_000)]
  path.write_text(" ".join(words))  # ~11 MB, no newline at all
  assert path.stat().st_size > 10_000_000
  manifest = build_pretraining_data(str(path), toy_vocab, str(tmp_path / "data"),
                                    max_seq_length=128, num_workers=1, show_progress=False)
  assert manifest.documents == 1
  # Every word is one token and none is lost; [CLS]/[SEP]s come on top.
  special = manifest.tokens - len(words)
  assert 2 * manifest.examples <= special <= 3 * manifest.examples
  assert manifest.examples == pytest.approx(len(words) / 125, rel=0.02)


def _documents(manifest, vocab) -> set[int]:
  """The toy documents whose words fill the records of `manifest`."""
  specials = {vocab.cls_id, vocab.sep_id, vocab.pad_id}
  return {int(vocab.tokens[i][1:]) // WORDS_PER_DOCUMENT
          for row in read_records(manifest) for i in row[features.INPUT_IDS] if i not in specials}


def _words(manifest, vocab) -> int:
  specials = {vocab.cls_id, vocab.sep_id, vocab.pad_id}
  return sum(i not in specials for row in read_records(manifest) for i in row[features.INPUT_IDS])


def test_holdout_sets_whole_documents_aside(tmp_path, toy_vocab):
  corpus = str(tmp_path / "corpus.txt")
  write_corpus(corpus, num_documents=2 * NUM_DOCUMENTS, seed=5)  # documents 0..79, one file
  kwargs = dict(max_seq_length=L, num_workers=1, min_shards=2, seed=3, show_progress=False)
  plain = build_pretraining_data(corpus, toy_vocab, str(tmp_path / "plain"), **kwargs)
  split = build_pretraining_data(corpus, toy_vocab, str(tmp_path / "split"),
                                 holdout_fraction=0.25, **kwargs)
  held = read_manifest(os.path.join(split.data_dir, "held_out"))
  assert not os.path.exists(os.path.join(plain.data_dir, "held_out"))
  train_docs, held_docs = _documents(split, toy_vocab), _documents(held, toy_vocab)
  assert not train_docs & held_docs, "a document was split between train and held-out"
  assert train_docs | held_docs == _documents(plain, toy_vocab) == set(range(80))
  assert 8 <= len(held_docs) <= 32  # about a quarter of 80
  assert split.documents + held.documents == plain.documents
  # Every word lands on one side ([CLS]/[SEP] counts vary with the packing).
  assert _words(split, toy_vocab) + _words(held, toy_vocab) == _words(plain, toy_vocab)
  assert held.vocab_md5 == split.vocab_md5 and held.max_seq_length == L
  # The same seed splits alike.
  again = build_pretraining_data(corpus, toy_vocab, str(tmp_path / "again"),
                                 holdout_fraction=0.25, **kwargs)
  assert _documents(read_manifest(os.path.join(again.data_dir, "held_out")), toy_vocab) == \
      held_docs


@pytest.mark.parametrize("fraction, needle", [(0.6, "out of range"), (1e-9, "set aside none")])
def test_bad_holdout_fraction_is_refused_and_writes_nothing(tmp_path, toy_corpus, toy_vocab,
                                                            fraction, needle):
  out = str(tmp_path / "data")
  with pytest.raises(UserError, match=needle):
    build_pretraining_data(toy_corpus, toy_vocab, out, max_seq_length=L, num_workers=1,
                           show_progress=False, holdout_fraction=fraction)
  assert not os.path.exists(out) and os.listdir(tmp_path) == []
