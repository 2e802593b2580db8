"""Tokenizer settings beside the vocab: learned per script, inferred for old vocabs, checked
against data and flags; ids equal transformers' on real text of four languages."""

import json
import os
import unicodedata

import pytest
import tensorflow as tf

from electra_tf.data import tokenizer_spec as spec_lib
from electra_tf.data.bert_text import BasicTokenizer
from electra_tf.data.corpora import language_corpus
from electra_tf.data.tokenizer import make_tokenizer
from electra_tf.data.tokenizer_spec import TokenizerSpec
from electra_tf.data.vocab import (
    builtin_vocab_path,
    copy_vocab,
    load_vocab,
    load_vocab_overriding,
)
from electra_tf.data.vocab_learning import learn_vocab
from electra_tf.errors import UserError

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


def _lines(path, limit=None):
  lines = [line for line in open(path, encoding="utf-8").read().splitlines() if line.strip()]
  return lines[:limit]


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
  """A WordPiece vocab learned with the defaults on each language's training text."""
  root = tmp_path_factory.mktemp("vocabs")
  vocabs = {}
  for lang in ("ko", "zh", "ja", "de"):
    # The first lines only, enough and quick (German's long words slow the learner most).
    train = str(root / f"{lang}_train.txt")
    with open(train, "w", encoding="utf-8") as f:
      f.write("\n".join(_lines(language_corpus(lang, "train"), 200 if lang == "de" else 3000))
              + "\n")
    chars = {c for line in _lines(train) for c in line}
    lower = lang != "de"  # a cased European language, as electra-learn-vocab --nolower_case
    spec = spec_lib.choose_for_corpus(chars, lower, None)
    vocabs[lang] = learn_vocab(train, 2000, spec, output_path=str(root / f"{lang}.txt"))
  return vocabs


def test_settings_are_chosen_from_the_script(learned):
  assert learned["ko"].spec == TokenizerSpec(lower_case=True, strip_accents=False)
  assert learned["ja"].spec == TokenizerSpec(lower_case=True, strip_accents=False)
  assert learned["zh"].spec.lower_case and learned["zh"].spec.split_cjk
  assert learned["de"].spec == TokenizerSpec(lower_case=False, strip_accents=False)
  # Written beside each vocab, and read back from there.
  assert load_vocab(learned["ko"].path).spec == learned["ko"].spec
  assert os.path.isfile(spec_lib.spec_path(learned["ko"].path))


def test_scripts_keep_their_letters(learned):
  ko = make_tokenizer(learned["ko"])
  pieces = ko.ids_to_tokens(ko.tokenize(["대한민국은 민주공화국이다."]).to_list()[0])
  assert "".join(p.removeprefix("##") for p in pieces) == "대한민국은민주공화국이다."
  assert all(unicodedata.name(c).startswith(("HANGUL SYLLABLE", "FULL STOP"))
             for p in pieces for c in p.removeprefix("##"))
  ja = BasicTokenizer(learned["ja"].spec)
  assert [w.decode() for w in ja.split(["AIとは何ですか？"]).strings.numpy()] == \
      ["aiとは", "何", "ですか", "？"]  # で keeps its mark; the full-width ？ is not folded


@pytest.mark.parametrize("lang", ["ko", "zh", "ja", "de"])
def test_ids_equal_transformers_on_held_out_text(learned, lang, tmp_path):
  vocab = learned[lang]
  folder = tmp_path / "hf"
  folder.mkdir()
  copy_vocab(vocab, str(folder))
  (folder / "tokenizer_config.json").write_text(json.dumps(
      {"tokenizer_class": "ElectraTokenizer", **vocab.spec.hf_settings()}))
  reference = transformers.AutoTokenizer.from_pretrained(str(folder))
  lines = _lines(language_corpus(lang, "held_out"), 300)
  ours = make_tokenizer(vocab).tokenize(lines).to_list()
  theirs = [reference(line, add_special_tokens=False)["input_ids"] for line in lines]
  assert ours == theirs
  # Held-out characters the small training text never showed are [UNK]; nothing else is.
  assert sum(t.count(vocab.unk_id) for t in ours) < 0.08 * sum(map(len, ours))


def test_normalization_equals_transformers_on_the_basic_multilingual_plane():
  norm = tokenizers.normalizers.BertNormalizer(lowercase=True, strip_accents=True,
                                               handle_chinese_chars=True, clean_text=True)
  pre = tokenizers.pre_tokenizers.BertPreTokenizer()
  cps = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
  texts = [f"a{chr(c)}b" for c in cps]
  words = BasicTokenizer(TokenizerSpec()).split(texts)
  ours = [[w.decode() for w in row] for row in words.batched(words.strings).to_list()]
  differ = [c for c, text, mine in zip(cps, texts, ours, strict=True)
            if mine != [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]]
  # Only characters whose Unicode category is newer than transformers' tables.
  assert len(differ) < 250, [hex(c) for c in differ[:20]]
  assert not [c for c in differ if c < 0x0600 or 0x3040 <= c <= 0x30FF
              or 0xAC00 <= c <= 0xD7A3 or 0x4E00 <= c <= 0x9FFF]


def test_offsets_slice_the_original_text(bert_vocab):
  tokenizer = make_tokenizer(bert_vocab)
  text = "Ça  va,\tnaïve   世界 here\x00null ok"
  ids, starts, ends = tokenizer.tokenize_with_offsets([text])
  raw = text.encode()
  spans = [raw[s:e].decode() for s, e in zip(starts.to_list()[0], ends.to_list()[0],
                                             strict=True)]
  # The control character is deleted inside the word, as transformers does.
  assert spans == ["Ça", "va", ",", "naïve", "世", "界", "here", "nu", "ll", "ok"]
  assert tokenizer.ids_to_tokens(ids.to_list()[0])[6:9] == ["here", "##nu", "##ll"]
  words, word_starts, word_ends = tokenizer.tokenize_words([text])
  assert words.shape.rank == 3 and word_starts.to_list()[0][0] == 0


def test_vocab_without_settings_is_inferred_and_said(tmp_path, capsys):
  hangul = tmp_path / "ko_vocab.txt"
  hangul.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "대한", "##민국",
                               "the"]) + "\n")
  assert load_vocab(str(hangul)).spec == TokenizerSpec(lower_case=True, strip_accents=False)
  assert f"no tokenizer settings beside {hangul}: inferred" in capsys.readouterr().err
  cased = tmp_path / "cased.txt"
  cased.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "The", "the"]))
  assert load_vocab(str(cased)).spec == TokenizerSpec(lower_case=False, strip_accents=False)
  assert load_vocab(builtin_vocab_path()).spec == TokenizerSpec()


def test_hf_tokenizer_config_beside_the_vocab_is_read(tmp_path):
  (tmp_path / "vocab.txt").write_text(open(builtin_vocab_path()).read())
  (tmp_path / "tokenizer_config.json").write_text(json.dumps(
      {"do_lower_case": True, "strip_accents": False}))
  assert load_vocab(str(tmp_path / "vocab.txt")).spec == TokenizerSpec(strip_accents=False)


def test_flags_override_an_unrecorded_vocab_and_must_match_a_recorded_one(learned):
  assert load_vocab_overriding(builtin_vocab_path(), {"lower_case": False}).spec == \
      TokenizerSpec(lower_case=False, strip_accents=False)
  with pytest.raises(UserError, match=r"the vocab .*ko.txt tokenizes with \(wordpiece, "
                     r"lower_case=True, strip_accents=False, split_cjk=True\) but this run's "
                     r"settings with \(wordpiece, lower_case=False"):
    load_vocab_overriding(learned["ko"].path, {"lower_case": False})


def test_sentencepiece_learns_tokenizes_and_refuses_the_wrong_kind(tmp_path):
  train = language_corpus("ja", "train")
  model = str(tmp_path / "spm.model")
  vocab = learn_vocab(train, 2000, TokenizerSpec.create("sentencepiece", False),
                      output_path=model)
  assert vocab.tokens[:5] == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
  assert load_vocab(model).spec.kind == "sentencepiece"
  tokenizer = make_tokenizer(vocab)
  lines = _lines(train, 20)
  ids = tokenizer.tokenize(lines)
  # SentencePiece's own normalization (NFKC) is all that changes the text, but for the
  # rarest characters, left out of the model (character_coverage) and so [UNK].
  known = [i for i, row in enumerate(ids.to_list()) if vocab.unk_id not in row]
  assert len(known) > 10
  texts = tokenizer.detokenize(ids).numpy()
  assert [texts[i].decode() for i in known] == [
      unicodedata.normalize("NFKC", lines[i]) for i in known]
  fn = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
  assert fn(tf.constant(lines)).to_list() == ids.to_list()
  with pytest.raises(UserError, match=r"spm.model tokenizes with \(sentencepiece.*but this "
                     r"run's settings with \(wordpiece"):
    load_vocab(model, spec=TokenizerSpec())
  bare = tmp_path / "bare.model"  # no settings beside it
  bare.write_bytes(open(model, "rb").read())
  assert load_vocab(str(bare)).spec.kind == "sentencepiece"
  with pytest.raises(UserError, match="is a SentencePiece model, not a WordPiece vocab"):
    load_vocab(str(bare), spec=TokenizerSpec())
  with pytest.raises(UserError, match="is not a SentencePiece model"):
    load_vocab(builtin_vocab_path(), spec=TokenizerSpec.create("sentencepiece", False))
