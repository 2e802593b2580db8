"""Raw-text exports tokenize with the TokenizerSpec of their vocab: the SavedModel's detect_text
and the TF Hub preprocessor give the ids of our Python tokenizer for a cased, an uncased, an
uncased-without-accent-stripping WordPiece vocab and a SentencePiece model, each learned here
on real text; fine-tuned directories carry their spec (or infer it once from an old
finetune.json); keras-hub refuses a SentencePiece vocab."""

import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from electra_tf.config import EncoderConfig
from electra_tf.data import vocab as vocab_lib
from electra_tf.data.tokenizer import make_tokenizer
from electra_tf.data.tokenizer_spec import TokenizerSpec, spec_path
from electra_tf.data.vocab_learning import learn_vocab
from electra_tf.errors import UserError
from electra_tf.model.networks import Discriminator, dummy_inputs
from electra_tf.serving import keras_hub_preset, saved_model, sources, text, tfhub
from electra_tf.serving.signatures import PretrainingServing
from electra_tf.tasks.classification_data import movie_reviews

SPECS = {
    "uncased": TokenizerSpec.create("wordpiece", lower_case=True),
    "cased": TokenizerSpec.create("wordpiece", lower_case=False),
    "no_strip": TokenizerSpec.create("wordpiece", lower_case=True, strip_accents=False),
    "sentencepiece": TokenizerSpec.create("sentencepiece", lower_case=False),
}
# Text where the settings disagree: case, accents, Hangul and kana (broken by stripping),
# full-width forms, control characters, CJK ideographs.
EXTRA = ["Héllo WÖRLD, Zürich Café!", "東京 and 北京 are cities.",
         "한국어 문장입니다. 대한민국 헌법", "AIとは何ですか？ です。",
         "here\x07null ½ ｆｕｌｌ width", "ÉCOLE école Straße ŒUVRE"]
TEXTS = ["", "The quick brown fox.", *EXTRA, "x" * 120]
SEQ = 64


def _corpus(path):
  _, train, _ = movie_reviews(seed=0)
  lines = [e.texts[0] for e in train[:1500]] + EXTRA * 20
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def vocabs(tmp_path_factory):
  """{name: Vocab} learned on movie reviews plus EXTRA, one per SPECS entry."""
  root = tmp_path_factory.mktemp("vocabs")
  corpus = _corpus(root / "text.txt")
  made = {}
  for name, spec in SPECS.items():
    file = "spm.model" if spec.kind == "sentencepiece" else "vocab.txt"
    os.makedirs(root / name)
    made[name] = learn_vocab(corpus, 800, spec, output_path=str(root / name / file),
                                       stream=io.StringIO())
  return made


def _want_ids(vocab, texts, seq):
  ids = make_tokenizer(vocab).tokenize(texts).to_list()
  return [([vocab.cls_id] + row[:seq - 2] + [vocab.sep_id] + [vocab.pad_id] * seq)[:seq]
          for row in ids]


@pytest.mark.parametrize("name", list(SPECS))
def test_saved_model_raw_text_gives_the_python_tokenizers_ids(vocabs, tmp_path, name):
  vocab = vocabs[name]
  assert vocab.spec == SPECS[name]
  tf_keras.utils.set_random_seed(0)
  disc = Discriminator(EncoderConfig(hidden_size=16, num_layers=1, num_heads=2,
                                     intermediate_size=32, embedding_size=16,
                                     max_position_embeddings=SEQ, vocab_size=vocab.size))
  disc(dummy_inputs())
  path = saved_model.save(PretrainingServing(disc, vocab, SEQ), str(tmp_path / "sm"))
  assets = sorted(os.listdir(os.path.join(path, "assets")))
  assert os.path.basename(spec_path(vocab.path)) in assets  # the spec travels with the vocab
  served = tf.saved_model.load(path).signatures["detect_text"](text=tf.constant(TEXTS))
  longest = min(SEQ, 2 + max(len(row) for row in make_tokenizer(vocab).tokenize(TEXTS).to_list()))
  # Padded to the batch's longest sequence, not to SEQ.
  assert served["input_ids"].numpy().tolist() == [row[:longest]
                                                  for row in _want_ids(vocab, TEXTS, SEQ)]


@pytest.mark.parametrize("name", ["no_strip", "sentencepiece"])  # what BertTokenizer cannot
def test_tfhub_preprocessor_tokenizes_with_the_spec(vocabs, tmp_path, name):
  vocab = vocabs[name]
  tfhub.write_preprocessor(vocab, str(tmp_path / "pre"), seq_length=SEQ)
  loaded = tf.saved_model.load(str(tmp_path / "pre"))
  packed = loaded(tf.constant(TEXTS))
  assert packed["input_word_ids"].numpy().tolist() == _want_ids(vocab, TEXTS, SEQ)
  ours = text.pack_sentences(make_tokenizer(vocab), [tf.constant(TEXTS[:4]),
                                                     tf.constant(TEXTS[4:8])], 24,
                             vocab.cls_id, vocab.sep_id, buckets=(24,))
  pair = loaded.bert_pack_inputs([loaded.tokenize(tf.constant(TEXTS[:4])),
                                  loaded.tokenize(tf.constant(TEXTS[4:8]))], seq_length=24)
  for hub_key, our_key in tfhub.HUB_INPUTS.items():
    np.testing.assert_array_equal(pair[hub_key].numpy(), ours[our_key].numpy())
  specials = {k: int(v) for k, v in loaded.tokenize.get_special_tokens_dict().items()}
  assert specials["vocab_size"] == vocab.size and specials["padding_id"] == vocab.pad_id


def test_uncased_and_no_strip_vocabs_differ_on_this_text(vocabs):
  """The test above would pass vacuously if the settings changed nothing on TEXTS."""
  uncased, no_strip = vocabs["uncased"], vocabs["no_strip"]
  as_uncased = vocab_lib.Vocab(**{**no_strip.__dict__, "spec": uncased.spec})
  assert make_tokenizer(as_uncased).tokenize(EXTRA).to_list() != \
      make_tokenizer(no_strip).tokenize(EXTRA).to_list()


def test_finetuned_dirs_carry_their_spec(vocabs, tmp_path):
  vocab = vocabs["no_strip"]
  new = tmp_path / "new"
  os.makedirs(new)
  vocab_lib.copy_vocab(vocab, str(new))  # what fine-tuning writes beside its model
  stream = io.StringIO()
  assert sources.finetuned_vocab(str(new), {"lower_case": False}, stream).spec == vocab.spec
  assert stream.getvalue() == ""  # the sidecar wins over an old record's lower_case

  old = tmp_path / "old"  # a directory from before specs: vocab.txt and lower_case only
  os.makedirs(old)
  with open(vocab.path, "rb") as src, open(old / "vocab.txt", "wb") as dst:
    dst.write(src.read())
  for lower in (True, False):
    stream = io.StringIO()
    got = sources.finetuned_vocab(str(old), {"lower_case": lower}, stream)
    assert got.spec == TokenizerSpec.create("wordpiece", lower_case=lower)
    assert len(stream.getvalue().splitlines()) == 1 and "finetune.json" in stream.getvalue()
  with pytest.raises(UserError, match="holds no vocab.txt or spm.model"):
    sources.finetuned_vocab(str(tmp_path), {})


def test_keras_hub_refuses_a_sentencepiece_vocab(vocabs):
  source = sources.EncoderSource(encoder=None, vocab=vocabs["sentencepiece"])
  with pytest.raises(UserError, match="ElectraTokenizer is WordPiece only"):
    keras_hub_preset.export(source, "/nonexistent/preset")
  config = keras_hub_preset.tokenizer_config(sources.EncoderSource(None, vocabs["no_strip"]))
  assert (config["config"]["lowercase"], config["config"]["strip_accents"]) == (True, False)
  assert json.dumps(config)
