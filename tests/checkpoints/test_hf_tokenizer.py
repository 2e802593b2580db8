"""Hugging Face tokenizer files written from a vocab's spec give our ids in transformers'
AutoTokenizer, and Hugging Face folders import with the settings they record."""

import json

import pytest

# Cased and accented Latin, Korean, Chinese, Japanese, German, and what normalization changes
# (full-width forms, ½, non-breaking and ideographic spaces, runs of spaces, control chars).
TEXTS = [
    "The Broncos took an early lead in Super Bowl 50 and never trailed.",
    "Café naïve résumé: the ÉCOLE in Zürich opened in 1891.",
    "Warsaw, especially Śródmieście, is home to many institutions.",
    "대한민국은 민주공화국이다. 모든 권력은 국민으로부터 나온다.",
    "유구한 역사와 전통에 빛나는 우리 대한국민은 ㅋㅋ",
    "这本书的纸张较厚，我的孩子很喜欢。出版社没有一点安全意识！",
    "怎么回事？质量很好，值得购买。",
    "AIとは何ですか？東京で会議が開かれた。",
    "ｶﾀｶﾅとカタカナ、ＦＵＬＬ－ｗｉｄｔｈ １２３",
    "Die Präsidentin eröffnet die Sitzung. Straße und Maß.",
    "Ein\u00a0Abgeordneter sagte:  „Das ist   gut“\tund\u3000ging.",
    "1½ cups and ¼ inch; ﬁne ligatures™",
    "control\x07chars and zero\u200bwidth",
    "  leading and trailing spaces  ",
    "Η ΕΛΛΗΝΙΚΗ ΔΗΜΟΚΡΑΤΙΑ ΣΑΣ ΚΑΛΩΣ ΟΡΙΖΕΙ: ο πρόεδρος της Βουλής.",  # final sigma
]
HELD_OUT = [
    "Newton was limited by Denver's defense, which sacked him seven times.",
    "Große Koalition: Überweisung an die Ausschüsse.",
    "국회는 국민의 보통·평등·직접·비밀선거에 의하여 선출된 국회의원으로 구성한다.",
    "快递很快，包装完好，五星好评。",
    "会議は午後３時から始まります。",
    "ÀÉÎÕÜ àéîõü ÇÑ çñ",
]


def _squad(split, count):
  from electra_tf.data import builtin

  data = json.load(open(builtin.squad_path(split), encoding="utf-8"))["data"]
  return [p["context"] for article in data for p in article["paragraphs"]][:count]


def _corpus(tmp_path):
  path = tmp_path / "corpus.txt"
  # The short lines repeated so that the learners see each string often enough to keep it.
  path.write_text("\n".join(TEXTS * 6 + HELD_OUT + _squad("train", 80)) + "\n",
                  encoding="utf-8")
  return str(path)


def _learn(tmp_path, spec, size, model_type="unigram"):
  from electra_tf.data.vocab import VOCAB_NAMES
  from electra_tf.data.vocab_learning import learn_vocab

  out = tmp_path / "vocab"
  out.mkdir()
  return learn_vocab(_corpus(tmp_path), size, spec, output_path=str(out / VOCAB_NAMES[spec.kind]),
                     model_type=model_type, stream=open("/dev/null", "w"))


def _check_ids(vocab, directory):
  """Our ids and AutoTokenizer's on every text, single and paired; returns the tokenizer."""
  from transformers import AutoTokenizer

  from electra_tf.data.tokenizer import make_tokenizer

  theirs = AutoTokenizer.from_pretrained(str(directory))
  ours = make_tokenizer(vocab)
  texts = TEXTS + HELD_OUT + _squad("dev", 24)
  expected = ours.tokenize(texts).to_list()
  for text, ids in zip(texts, expected):
    assert theirs(text)["input_ids"] == [vocab.cls_id, *ids, vocab.sep_id], text
  pair = theirs(texts[0], texts[3])
  first, second = expected[0], expected[3]
  assert pair["input_ids"] == [vocab.cls_id, *first, vocab.sep_id, *second, vocab.sep_id]
  assert pair["token_type_ids"] == [0] * (len(first) + 2) + [1] * (len(second) + 1)
  assert theirs.pad_token_id == vocab.pad_id and theirs.mask_token_id == vocab.mask_id
  assert theirs.unk_token_id == vocab.unk_id
  return theirs


WORDPIECE_SPECS = {
    "uncased": dict(lower_case=True, strip_accents=True),
    "cased": dict(lower_case=False, strip_accents=False),
    "lower-no-strip": dict(lower_case=True, strip_accents=False),  # Korean stays whole
}


@pytest.mark.parametrize("name", list(WORDPIECE_SPECS))
def test_wordpiece_export_gives_our_ids(tmp_path, name):
  from electra_tf.checkpoints.hf_tokenizer import write_hf_tokenizer
  from electra_tf.data.tokenizer_spec import TokenizerSpec

  spec = TokenizerSpec.create("wordpiece", **WORDPIECE_SPECS[name])
  vocab = _learn(tmp_path, spec, 600)
  assert vocab.spec == spec
  out = tmp_path / "hf"
  out.mkdir()
  written = write_hf_tokenizer(vocab, str(out), max_length=64)
  assert sorted(p.rsplit("/", 1)[1] for p in written) == [
      "special_tokens_map.json", "tokenizer_config.json", "vocab.txt"]
  config = json.loads((out / "tokenizer_config.json").read_text())
  assert config["tokenizer_class"] == "ElectraTokenizer" and config["model_max_length"] == 64
  assert {k: config[k] for k in spec.hf_settings()} == spec.hf_settings()
  _check_ids(vocab, out)
  if name == "lower-no-strip":  # Hangul syllables are pieces, not jamo
    assert "민주" in vocab.tokens or "##민" in vocab.tokens or "민" in vocab.tokens


@pytest.mark.parametrize("model_type,lower", [("unigram", False), ("unigram", True),
                                              ("bpe", False)])
def test_sentencepiece_export_gives_our_ids(tmp_path, model_type, lower):
  from electra_tf.checkpoints.hf_tokenizer import write_hf_tokenizer
  from electra_tf.data.tokenizer_spec import TokenizerSpec

  spec = TokenizerSpec.create("sentencepiece", lower_case=lower)
  vocab = _learn(tmp_path, spec, 800, model_type)
  out = tmp_path / "hf"
  out.mkdir()
  written = write_hf_tokenizer(vocab, str(out))
  assert sorted(p.rsplit("/", 1)[1] for p in written) == [
      "special_tokens_map.json", "spm.model", "tokenizer.json", "tokenizer_config.json"]
  assert (out / "spm.model").read_bytes() == open(vocab.path, "rb").read()
  config = json.loads((out / "tokenizer_config.json").read_text())
  assert config["do_lower_case"] is lower
  tokenizer_json = json.loads((out / "tokenizer.json").read_text())
  assert tokenizer_json["model"]["type"] == {"unigram": "Unigram", "bpe": "BPE"}[model_type]
  theirs = _check_ids(vocab, out)
  # The model's own normalization is applied (DebertaV2Tokenizer would skip it).
  assert theirs.backend_tokenizer.normalizer.normalize_str("½").endswith("1⁄2")


def _hf_electra(directory, vocab_size, **tokenizer):
  """An ElectraForPreTraining folder with transformers' tokenizer files and a vocab.txt, as
  released ELECTRAs ship them."""
  import transformers
  from hf_twins import randomize

  shape = {"vocab_size": vocab_size, "embedding_size": 16, "hidden_size": 32,
           "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 37,
           "max_position_embeddings": 40}
  model = transformers.ElectraForPreTraining(transformers.ElectraConfig(**shape))
  randomize(model, 0).save_pretrained(directory)
  return model


def test_import_keeps_do_lower_case_and_strip_accents(tmp_path):
  import transformers

  from electra_tf.checkpoints.converter import convert
  from electra_tf.data.tokenizer_spec import TokenizerSpec, read_spec
  from electra_tf.data.vocab import load_vocab

  # A cased vocab with accents, as the Korean and multilingual ELECTRAs ship theirs.
  vocab = _learn(tmp_path, TokenizerSpec.create("wordpiece", lower_case=False), 600)
  folder = tmp_path / "koelectra"
  _hf_electra(folder, vocab.size)
  tokens = {t: i for i, t in enumerate(vocab.tokens)}
  transformers.ElectraTokenizer(vocab=tokens, do_lower_case=False, strip_accents=False
                                ).save_pretrained(folder)
  (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab.tokens), encoding="utf-8")
  # Ours infers nothing: the settings are the ones transformers wrote.
  spec = load_vocab(str(folder / "vocab.txt")).spec
  assert (spec.lower_case, spec.strip_accents) == (False, False)
  out = tmp_path / "converted"
  convert("hf", None, str(folder), str(out))
  assert read_spec(str(out / "vocab.txt")) == spec
  assert load_vocab(str(out / "vocab.txt")).md5 == vocab.md5
  # Back out to Hugging Face: the same settings, and AutoTokenizer gives our ids.
  convert(None, "hf", str(out), str(tmp_path / "hf"))
  config = json.loads((tmp_path / "hf" / "discriminator" / "tokenizer_config.json").read_text())
  assert (config["do_lower_case"], config["strip_accents"]) == (False, False)
  _check_ids(load_vocab(str(out / "vocab.txt")), tmp_path / "hf" / "discriminator")


def test_import_of_a_folder_without_vocab_txt(tmp_path):
  """transformers 5 saves a WordPiece vocab only inside tokenizer.json."""
  import transformers

  from electra_tf.checkpoints.converter import convert
  from electra_tf.data.tokenizer_spec import TokenizerSpec, read_spec
  from electra_tf.data.vocab import load_vocab

  vocab = _learn(tmp_path, TokenizerSpec.create("wordpiece", lower_case=True,
                                                strip_accents=False), 600)
  folder = tmp_path / "saved_by_v5"
  _hf_electra(folder, vocab.size)
  transformers.ElectraTokenizer(vocab={t: i for i, t in enumerate(vocab.tokens)},
                                do_lower_case=True, strip_accents=False).save_pretrained(folder)
  assert not (folder / "vocab.txt").exists()
  out = tmp_path / "converted"
  convert("hf", None, str(folder), str(out))
  assert read_spec(str(out / "vocab.txt")) == vocab.spec
  assert load_vocab(str(out / "vocab.txt")).tokens == vocab.tokens


def test_sentencepiece_round_trip(tmp_path):
  """Ours -> Hugging Face (AutoTokenizer gives our ids) -> ours: the same model and spec."""
  from electra_tf.checkpoints.converter import Loaded, RestoreReport, convert, save
  from electra_tf.config import EncoderConfig, PretrainConfig
  from electra_tf.data.tokenizer_spec import TokenizerSpec, read_spec
  from electra_tf.data.vocab import load_vocab
  from electra_tf.model.networks import build_networks

  vocab = _learn(tmp_path, TokenizerSpec.create("sentencepiece", lower_case=True), 800)
  config = PretrainConfig(model=EncoderConfig(
      vocab_size=vocab.size, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=37,
      embedding_size=16, max_position_embeddings=40), max_seq_length=32)
  generator, discriminator = build_networks(config)
  loaded = Loaded(config, generator, discriminator, vocab.path, "test",
                  RestoreReport("test", 0, 0))
  ours = tmp_path / "ours"
  save(loaded, str(ours))
  assert read_spec(str(ours / "spm.model")) == vocab.spec
  convert(None, "hf", str(ours), str(tmp_path / "hf"))
  for network in ("discriminator", "generator"):
    _check_ids(vocab, tmp_path / "hf" / network)
  back = tmp_path / "back"
  convert("hf", None, str(tmp_path / "hf" / "discriminator"), str(back))
  again = load_vocab(str(back / "spm.model"))
  assert again.md5 == vocab.md5 and again.spec == vocab.spec


def test_deberta_style_folder_imports_as_sentencepiece(tmp_path):
  """spm.model with DeBERTa-v2's tokenizer_config.json (do_lower_case) next to the weights."""
  from electra_tf.checkpoints.converter import read_source
  from electra_tf.data.tokenizer_spec import TokenizerSpec
  from electra_tf.data.vocab import load_vocab

  vocab = _learn(tmp_path, TokenizerSpec.create("sentencepiece", lower_case=True), 800)
  folder = tmp_path / "hf"
  _hf_electra(folder, vocab.size)
  (folder / "spm.model").write_bytes(open(vocab.path, "rb").read())
  (folder / "tokenizer_config.json").write_text(json.dumps(
      {"tokenizer_class": "DebertaV2Tokenizer", "do_lower_case": True}))
  source = read_source(str(folder))
  assert source.vocab_path.endswith("spm.model")
  assert load_vocab(source.vocab_path).spec == TokenizerSpec.create("sentencepiece", True)
