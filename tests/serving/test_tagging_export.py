"""The SavedModel of a tagging run: a tiny tagger fine-tuned for a few steps on made-up English
names and places, exported (windows of 16 pieces, 7 apart) and reloaded; tag_text's spans
slice accented, CJK and multi-space text exactly, its per-word tags equal the Keras model's
argmax on finetune.py's windows, its entities equal tagging_metrics' decoding of those tags;
tag_words and serving_default equal the Keras model; every scheme's chunks decode as
seqeval's default mode; warmup requests replay; the ONNX and TFLite exports give the Keras
model's per-token logits and probabilities in onnxruntime and LiteRT; a SentencePiece vocab
tags as the Python does."""

import dataclasses
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the text signatures' ops)
import tf_keras
from export_runs import TINY
from tensorflow_serving.apis import prediction_log_pb2

from electra_tf.config import FinetuneConfig
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.data.vocab import builtin_vocab_path
from electra_tf.model.finetune_models import build_finetune_model, model_for_task
from electra_tf.serving import exporters, saved_model
from electra_tf.serving.tag_signatures import TaggerServing
from electra_tf.tasks.tagging import TaggingSpec
from electra_tf.tasks.tagging_features import encode_windows, word_pieces
from electra_tf.tasks.tagging_metrics import default_entities
from electra_tf.training.finetuned import save_finetuned

CONFIG = FinetuneConfig(task="tagging", max_seq_length=16, doc_stride=7)
LABELS = ("B-LOC", "B-PER", "I-LOC", "I-PER", "O")
SPEC = TaggingSpec("tagging", LABELS, "iob2", "f1")
FIRST = ["Ann", "José", "Zoë", "Li", "Omar", "Björn"]
LAST = ["Smith", "Müller", "Nakamura", "García"]
PLACES = [["Paris"], ["New", "York"], ["Zürich"], ["São", "Paulo"], ["東", "京"]]
TEXTS = [
    "José  Müller lives in   Zürich .",
    "東京に住む Ann Smith。Björn García flew to São Paulo!",
    "Ann Smith met Li Nakamura in New York, then Omar Müller in Paris. " * 3,  # windows
    "", "   ", "Zoë\u00a0Smith\tvisited\n\nParis (France).",
]


def _sentences(n, seed=0):
  rng = random.Random(seed)
  out = []
  for _ in range(n):
    first, last, place = rng.choice(FIRST), rng.choice(LAST), rng.choice(PLACES)
    words = [first, last, "lives", "in", *place, "."]
    tags = ["B-PER", "I-PER", "O", "O", "B-LOC"] + ["I-LOC"] * (len(place) - 1) + ["O"]
    out.append((words, tags))
  return out


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
  """(Keras tagger fine-tuned for a few steps, the tokenizer, the loaded SavedModel, its
  path, the fine-tuning output_dir)."""
  root = tmp_path_factory.mktemp("tagger")
  tf_keras.utils.set_random_seed(0)
  tokenizer = WordPieceTokenizer(builtin_vocab_path())
  vocab = tokenizer.vocab
  train = _sentences(64)
  index = {t: i for i, t in enumerate(LABELS)}
  windows = encode_windows(word_pieces([w for w, _ in train], tokenizer),
                           [[index[t] for t in tags] for _, tags in train],
                           CONFIG.max_seq_length, CONFIG.doc_stride, vocab.cls_id, vocab.sep_id)
  model = build_finetune_model(model_for_task(CONFIG, TINY, len(LABELS)))
  model.compile(optimizer=tf_keras.optimizers.legacy.Adam(3e-3))
  model.fit(tf.data.Dataset.from_tensor_slices(windows.features).batch(16), epochs=4, verbose=0)
  record = {"task": "tagging", "encoder": TINY.to_dict(), "finetune": CONFIG.to_dict(),
            "spec": dataclasses.asdict(SPEC), "max_seq_length": CONFIG.max_seq_length}
  run = save_finetuned(model, record, vocab, str(root / "run" / "best"))
  path = saved_model.export(str(root / "run"), None, str(root / "export"))
  assert run and path.endswith("/1")
  return model, tokenizer, tf.saved_model.load(path), path, str(root / "run")


def _python_tags(model, tokenizer, sentences):
  """finetune.py's per-word predictions: windows, the Keras model, each word's read."""
  vocab = tokenizer.vocab
  windows = encode_windows(word_pieces(sentences, tokenizer), None, CONFIG.max_seq_length,
                           CONFIG.doc_stride, vocab.cls_id, vocab.sep_id)
  logits = model(windows.features, training=False)["logits"].numpy()
  probs = tf.nn.softmax(logits).numpy()
  tags, scores = [], []
  for reads in windows.reads:
    best = [int(np.argmax(logits[w, p])) for w, p in reads]
    tags.append([LABELS[i] for i in best])
    scores.append([float(probs[w, p, i]) for (w, p), i in zip(reads, best)])
  return tags, scores


def _rows(out, keys):
  """Per example, {key: list} of the outputs trimmed to their counts."""
  rows = []
  for b in range(len(out["num_words"])):
    row = {}
    for key in keys:
      count = out["num_entities" if key.startswith("entity") else "num_words"][b]
      values = out[key][b][:count].tolist()
      row[key] = [v.decode() if isinstance(v, bytes) else v for v in values]
    rows.append(row)
  return rows


WORD_KEYS = ("word_starts", "word_ends", "word_tags", "word_scores")
ENTITY_KEYS = ("entity_starts", "entity_ends", "entity_types", "entity_scores")


def test_tag_text_spans_slice_the_text_and_equal_keras(tagger):
  model, tokenizer, loaded, _, _ = tagger
  out = {k: v.numpy() for k, v in loaded.signatures["tag_text"](text=tf.constant(TEXTS)).items()}
  rows = _rows(out, WORD_KEYS + ENTITY_KEYS + ("entity_texts",))
  words = []
  for text, row in zip(TEXTS, rows):
    spans = list(zip(row["word_starts"], row["word_ends"]))
    pieces = [text[s:e] for s, e in spans]
    words.append(pieces)
    # Words slice the text in order, and together they are all of its non-space characters.
    assert all(0 <= s < e <= len(text) for s, e in spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert "".join(pieces) == "".join(text.split())
  assert words[0] == ["José", "Müller", "lives", "in", "Zürich", "."]
  assert words[1][:4] == ["東", "京", "に", "住"]
  assert max(len(w) for w in words) > CONFIG.max_seq_length  # windows were needed
  expected_tags, expected_scores = _python_tags(model, tokenizer, words)
  entities = 0
  for text, row, tags, scores in zip(TEXTS, rows, expected_tags, expected_scores):
    assert row["word_tags"] == tags
    np.testing.assert_allclose(row["word_scores"], scores, atol=1e-5)
    # Entities are seqeval's default-mode chunks of those tags, spanning their words.
    chunks = default_entities([tags])
    assert row["entity_types"] == [t for t, _, _ in chunks]
    assert row["entity_starts"] == [row["word_starts"][a] for _, a, _ in chunks]
    assert row["entity_ends"] == [row["word_ends"][b] for _, _, b in chunks]
    np.testing.assert_allclose(row["entity_scores"],
                               [np.mean(scores[a:b + 1]) for _, a, b in chunks], atol=1e-5)
    assert row["entity_texts"] == [text[s:e] for s, e in zip(row["entity_starts"],
                                                             row["entity_ends"])]
    entities += len(chunks)
  assert entities >= 5, rows  # the few steps taught it names and places
  assert out["word_tags"].shape[0] == len(TEXTS) and rows[3]["word_tags"] == []


def test_tag_words_and_serving_default_equal_keras(tagger):
  model, tokenizer, loaded, _, _ = tagger
  sentences = [["José", "Müller", "lives", "in", "São", "Paulo", "."],
               ["U.S.", "citizens", "東京", "Ann", "Smith"] * 4, [], ["Ann", ""]]
  width = max(len(s) for s in sentences)
  padded = [s + [""] * (width - len(s)) for s in sentences]
  out = loaded.signatures["tag_words"](words=tf.constant(padded),
                                       num_words=tf.constant([len(s) for s in sentences]))
  rows = _rows({k: v.numpy() for k, v in out.items()}, WORD_KEYS + ENTITY_KEYS)
  expected_tags, _ = _python_tags(model, tokenizer, sentences)
  for sentence, row, tags in zip(sentences, rows, expected_tags):
    assert row["word_tags"] == tags
    assert row["word_starts"] == list(range(len(sentence)))  # spans count words here
    chunks = default_entities([tags])
    assert [(t, a, b + 1) for t, a, b in chunks] == list(
        zip(row["entity_types"], row["entity_starts"], row["entity_ends"]))
  # serving_default: the Keras model's logits on the same ids.
  vocab = tokenizer.vocab
  ids = encode_windows(word_pieces(sentences[:2], tokenizer), None, 16, 7, vocab.cls_id,
                       vocab.sep_id).features
  inputs = {k: tf.constant(ids[k]) for k in ("input_ids", "input_mask", "segment_ids")}
  served = loaded.signatures["serving_default"](**inputs)
  keras = model(inputs, training=False)["logits"].numpy()
  np.testing.assert_allclose(served["logits"].numpy(), keras, atol=1e-5)
  assert served["labels"].numpy()[0, 1].decode() == LABELS[int(np.argmax(keras[0, 1]))]


def test_every_scheme_decodes_as_seqeval_default_mode_and_plain_tags(tagger):
  model, tokenizer, _, _, _ = tagger
  rng = random.Random(1)
  for labels, scheme in ((("B-PER", "I-PER", "B-LOC", "I-LOC", "O"), "iob2"),
                         (("I-PER", "B-PER", "I-MISC", "O"), "iob1"),
                         (("B-X", "I-X", "E-X", "S-X", "S-Y", "B-Y", "E-Y", "O"), "bioes")):
    serving = TaggerServing(model, tokenizer.vocab, CONFIG.to_dict(),
                            {"label_names": labels, "scheme": scheme})
    sentences = [[rng.randrange(len(labels)) for _ in range(rng.randrange(0, 9))]
                 for _ in range(40)]
    flat = tf.constant([i for s in sentences for i in s], tf.int32)
    splits = tf.constant(np.cumsum([0] + [len(s) for s in sentences]), tf.int64)
    first, last, types = serving._chunks(flat, splits)
    got = list(zip([t.decode() for t in types.numpy()], first.numpy(), last.numpy()))
    expected, base = [], 0
    for s in sentences:
      expected += [(t, a + base, b + base)
                   for t, a, b in default_entities([[labels[i] for i in s]])]
      base += len(s)
    assert got == expected, scheme
  # Plain tags (part of speech): each word is returned with its tag and span.
  pos = TaggerServing(model, tokenizer.vocab, CONFIG.to_dict(),
                      {"label_names": LABELS, "scheme": "none"})
  out = pos.serve_text(tf.constant(["Zoë  Smith , 東京"]))
  assert out["num_entities"].numpy().tolist() == out["num_words"].numpy().tolist() == [5]
  assert out["entity_texts"].numpy()[0].tolist() == [b"Zo\xc3\xab", b"Smith", b",",
                                                    "東".encode(), "京".encode()]
  assert out["entity_types"].numpy().tolist() == out["word_tags"].numpy().tolist()


def test_warmup_requests_replay(tagger):
  _, _, loaded, path, _ = tagger
  names = []
  for record in tf.data.TFRecordDataset(path + "/assets.extra/tf_serving_warmup_requests"):
    request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
    names.append(request.model_spec.signature_name)
    loaded.signatures[names[-1]](**{k: tf.make_ndarray(v) for k, v in request.inputs.items()})
  assert names == ["serving_default", "tag_text", "tag_words"]


def test_onnx_and_tflite_exports_equal_keras(tagger, tmp_path):
  import json
  import os

  ort = pytest.importorskip("onnxruntime")
  litert = pytest.importorskip("ai_edge_litert.interpreter")
  model, tokenizer, _, _, run_dir = tagger
  vocab = tokenizer.vocab
  sentences = [["José", "Müller", "lives", "in", "São", "Paulo", "."], ["Ann", "Smith"] * 9]
  ids = encode_windows(word_pieces(sentences, tokenizer), None, 16, 7, vocab.cls_id,
                       vocab.sep_id).features
  inputs = {k: ids[k] for k in ("input_ids", "input_mask", "segment_ids")}
  logits = model(inputs, training=False)["logits"].numpy()
  want = {"logits": logits, "probabilities": tf.nn.softmax(logits).numpy()}
  exporters.export("onnx", run_dir, None, str(tmp_path / "onnx"))
  meta = json.load(open(tmp_path / "onnx" / "export.json"))
  assert meta["tag_scheme"] == "iob2" and meta["label_names"] == list(LABELS)
  session = ort.InferenceSession(str(tmp_path / "onnx" / "model.onnx"))
  got = dict(zip(meta["outputs"], session.run(meta["outputs"], inputs)))
  exporters.export("tflite", run_dir, None, str(tmp_path / "tflite"))
  runner = litert.Interpreter(model_path=os.path.join(tmp_path, "tflite", "model.tflite")
                              ).get_signature_runner("serving_default")
  rows = [runner(**{k: v[i:i + 1] for k, v in inputs.items()})
          for i in range(len(inputs["input_ids"]))]
  for key in ("logits", "probabilities"):
    np.testing.assert_allclose(got[key], want[key], atol=1e-4)
    np.testing.assert_allclose(np.concatenate([r[key] for r in rows]), want[key], atol=1e-3)


def test_sentencepiece_tagger_equals_python(tmp_path):
  """A SentencePiece vocab: tag_text's words slice the text and their tags equal the Python
  windows' on a random tagger; tag_words tokenizes each word as training does."""
  import io

  import sentencepiece

  from electra_tf.data.tokenizer import make_tokenizer
  from electra_tf.data.tokenizer_spec import TokenizerSpec
  from electra_tf.data.vocab import load_vocab

  lines = [" ".join(w) for w, _ in _sentences(300, seed=2)] + TEXTS[:3] * 20
  model_file = io.BytesIO()
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(lines), model_writer=model_file, vocab_size=60,
      character_coverage=1.0, pad_id=0, pad_piece="[PAD]", unk_id=1, unk_piece="[UNK]",
      bos_id=2, bos_piece="[CLS]", eos_id=3, eos_piece="[SEP]", user_defined_symbols=["[MASK]"],
      minloglevel=2)
  (tmp_path / "spm.model").write_bytes(model_file.getvalue())
  vocab = load_vocab(str(tmp_path / "spm.model"), TokenizerSpec.create("sentencepiece"))
  tf_keras.utils.set_random_seed(3)
  encoder = dataclasses.replace(TINY, vocab_size=vocab.size)
  model = build_finetune_model(model_for_task(CONFIG, encoder, len(LABELS)))
  serving = TaggerServing(model, vocab, CONFIG.to_dict(), dataclasses.asdict(SPEC))
  tokenizer = make_tokenizer(vocab)
  out = {k: v.numpy() for k, v in serving.serve_text(tf.constant(TEXTS)).items()}
  rows = _rows(out, WORD_KEYS + ENTITY_KEYS)
  words = [[text[s:e] for s, e in zip(r["word_starts"], r["word_ends"])]
           for text, r in zip(TEXTS, rows)]
  assert words[0] == ["José", "Müller", "lives", "in", "Zürich", "."]
  assert all("".join(w) == "".join(t.split()) for w, t in zip(words, TEXTS))
  expected, _ = _python_tags(model, tokenizer, words)
  assert [r["word_tags"] for r in rows] == expected
  for row, tags in zip(rows, expected):
    assert row["entity_types"] == [t for t, _, _ in default_entities([tags])]
  padded = [w + [""] * (max(map(len, words)) - len(w)) for w in words]
  by_words = serving.serve_words(tf.constant(padded), tf.constant([len(w) for w in words]))
  assert [r["word_tags"] for r in _rows({k: v.numpy() for k, v in by_words.items()},
                                        WORD_KEYS)] == expected
