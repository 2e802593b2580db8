"""The tokenizer files of a Hugging Face folder, written from a Vocab and its TokenizerSpec so
that `transformers.AutoTokenizer.from_pretrained(folder)` gives our ids.

WordPiece: vocab.txt + tokenizer_config.json (ElectraTokenizer with the spec's
`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`) + special_tokens_map.json.

SentencePiece (unigram or BPE): the model as DeBERTa-v2/v3 ship it (spm.model, special
tokens [CLS] [SEP] [UNK] [PAD] [MASK], `do_lower_case`) plus a tokenizer.json in the
`tokenizers` library's format, written here with json alone, and a tokenizer_config.json
naming the generic PreTrainedTokenizerFast, which loads tokenizer.json as it is. Not
DebertaV2Tokenizer: transformers 5 builds that class's normalizer itself (whitespace, NFC,
strip) even when a tokenizer.json is present, skipping the model's own normalization
(nmt_nfkc: `½` -> `1⁄2`, non-breaking spaces, full-width forms), so its ids differ from
sentencepiece's (on 6 of 303 SQuAD dev paragraphs with a 1,500-piece model). With
tokenizer.json, ids equal ours on all but exact ties of the unigram lattice (`。。。。` as
`。。。` `。` or `。` `。。。`, same score), which the two libraries break in opposite order:
1 of 303 SQuAD paragraphs, 5 of 300 Chinese reviews, none of Korean, Japanese or German
text; BPE models gave equal ids on all of them.
"""

from __future__ import annotations

import base64
import json

from electra_tf import fileio
from electra_tf.data import tokenizer_spec as spec_lib
from electra_tf.data.tokenizer_spec import SENTENCEPIECE, WORDPIECE, TokenizerSpec
from electra_tf.data.vocab import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK, VOCAB_NAMES, Vocab
from electra_tf.errors import UserError

TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
TOKENIZER_JSON = "tokenizer.json"
METASPACE = "\u2581"  # SentencePiece's word-boundary mark
_SPECIAL_KEYS = {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS,
                 "mask_token": MASK}
_INPUT_NAMES = ["input_ids", "token_type_ids", "attention_mask"]
# ICU's Final_Sigma condition: a cased letter before (possibly one case-ignorable character
# between), none after (case-ignorable characters may come first). Measured against
# tf.strings.lower on 3,000 random strings of Greek letters, marks, apostrophes and dots:
# 15 differ, all with two or more case-ignorable characters between a letter and Σ.
_CASED = r"[\p{Lu}\p{Ll}\p{Lt}]"
_CASE_IGNORABLE = r"[\p{Mn}\p{Me}\p{Cf}\p{Lm}\p{Sk}'.:\u00b7\u2019\u00ad]"
_FINAL_SIGMA = (f"(?<={_CASED}|{_CASED}{_CASE_IGNORABLE})\u03a3"
                f"(?!{_CASE_IGNORABLE}*{_CASED})")
# sentencepiece ModelProto.TrainerSpec.ModelType
_UNIGRAM, _BPE = 1, 2


def write_hf_tokenizer(vocab: Vocab, directory: str, *, max_length: int = 512) -> list[str]:
  """Writes the tokenizer files of a Hugging Face folder into `directory` (which exists).

  `AutoTokenizer.from_pretrained(directory)` then gives the ids of our tokenizer
  (`electra_tf.data.tokenizer.make_tokenizer(vocab)`), with [CLS] A [SEP] (B [SEP]) and
  segment ids 0 / 1 around them.

  WordPiece: vocab.txt, tokenizer_config.json (tokenizer_class ElectraTokenizer,
  `vocab.spec.hf_settings()`, model_max_length, the special tokens),
  special_tokens_map.json. SentencePiece: spm.model, tokenizer.json (our lower-casing, the
  model's normalization and whitespace rules, its pieces and scores or BPE merges, in the
  `tokenizers` format), tokenizer_config.json (tokenizer_class PreTrainedTokenizerFast,
  which uses tokenizer.json as it is, and do_lower_case for readers of the spec such as
  `vocab.recorded_spec`), special_tokens_map.json. Unigram ids can differ on exact score
  ties (see the module docstring).

  Args:
    vocab: the vocab with its spec (`electra_tf.data.vocab.load_vocab`).
    directory: an existing folder; files of the same names are replaced.
    max_length: model_max_length (the model's max_position_embeddings).

  Returns:
    The paths written.

  Raises:
    UserError: a SentencePiece model of type word or char, or one that marks words with a
      trailing boundary (these have no `tokenizers` equivalent here).
  """
  kind = vocab.spec.kind
  if kind == SENTENCEPIECE:
    tokenizer_json = sentencepiece_tokenizer_json(vocab)
  target = fileio.join(directory, VOCAB_NAMES[kind])
  fileio.copy(vocab.path, target)
  specials = dict(_SPECIAL_KEYS)
  config = {"tokenizer_class": "ElectraTokenizer", **vocab.spec.hf_settings()}
  if kind == SENTENCEPIECE:
    config = {"tokenizer_class": "PreTrainedTokenizerFast",
              "do_lower_case": vocab.spec.lower_case}
  config.update(specials, model_max_length=max_length, model_input_names=_INPUT_NAMES,
                added_tokens_decoder={str(_id(vocab, t)): _added(t) for t in SPECIAL_TOKENS})
  written = [target]
  files = {TOKENIZER_CONFIG: config, SPECIAL_TOKENS_MAP: specials}
  if kind == SENTENCEPIECE:
    files[TOKENIZER_JSON] = tokenizer_json
  for name, content in files.items():
    path = fileio.join(directory, name)
    fileio.write_text(path, json.dumps(content, indent=2, ensure_ascii=False) + "\n")
    written.append(path)
  return written


def wordpiece_from_tokenizer_json(directory: str) -> str | None:
  """The WordPiece vocab of a folder that holds it only in tokenizer.json (transformers 5
  saves no vocab.txt), written as vocab.txt with its spec beside it in a new temporary
  folder; its path, or None when the folder has no WordPiece tokenizer.json.

  The spec is the one transformers uses: tokenizer_config.json's settings (transformers 5
  rebuilds the normalizer from them), else the BertNormalizer's in tokenizer.json.
  """
  import tempfile

  file = fileio.join(directory, TOKENIZER_JSON)
  if not fileio.isfile(file):
    return None
  try:
    data = json.loads(fileio.read_text(file))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserError(f"{file} is not valid JSON ({e})") from None
  model = data.get("model") if isinstance(data, dict) else None
  if not isinstance(model, dict) or model.get("type") != "WordPiece":
    return None
  ids = model.get("vocab") or {}
  tokens = sorted(ids, key=ids.get)
  if sorted(ids.values()) != list(range(len(tokens))):
    raise UserError(f"{file}: the WordPiece ids are not 0..{len(tokens) - 1}; save the "
                    "tokenizer with a vocab.txt")
  normalizer = data.get("normalizer") or {}
  settings = {}
  if normalizer.get("type") == "BertNormalizer":
    settings = {"do_lower_case": normalizer.get("lowercase", True),
                "strip_accents": normalizer.get("strip_accents"),
                "tokenize_chinese_chars": normalizer.get("handle_chinese_chars", True)}
  config_file = fileio.join(directory, TOKENIZER_CONFIG)
  if fileio.isfile(config_file):
    try:
      config = json.loads(fileio.read_text(config_file))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      raise UserError(f"{config_file} is not valid JSON ({e})") from None
    keys = TokenizerSpec().hf_settings()
    settings.update({k: v for k, v in config.items() if k in keys})
  spec = TokenizerSpec.from_hf_settings(settings, WORDPIECE)
  path = fileio.join(tempfile.mkdtemp(prefix="electra_tf_hf_vocab_"), VOCAB_NAMES[WORDPIECE])
  fileio.write_text(path, "".join(f"{token}\n" for token in tokens))
  spec_lib.write_spec(spec, path)
  return path


def _id(vocab: Vocab, token: str) -> int:
  return {PAD: vocab.pad_id, UNK: vocab.unk_id, CLS: vocab.cls_id, SEP: vocab.sep_id,
          MASK: vocab.mask_id}[token]


def _added(token: str) -> dict:
  return {"content": token, "lstrip": False, "normalized": False, "rstrip": False,
          "single_word": False, "special": True}


def _model_proto(vocab: Vocab):
  from sentencepiece import sentencepiece_model_pb2

  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(fileio.read_bytes(vocab.path))
  return proto


def sentencepiece_tokenizer_json(vocab: Vocab) -> dict:
  """The `tokenizers` library's tokenizer.json for a SentencePiece vocab: our lower-casing,
  then the model's normalization (precompiled charsmap) and whitespace rules, Metaspace
  words, the Unigram pieces with their scores (or BPE merges), [CLS] A [SEP] (B [SEP])."""
  proto = _model_proto(vocab)
  trainer, norm = proto.trainer_spec, proto.normalizer_spec
  if trainer.model_type not in (_UNIGRAM, _BPE):
    raise UserError(f"{vocab.path} is a SentencePiece model of type {trainer.model_type} "
                    "(word or char); only unigram and BPE models export to Hugging Face")
  if trainer.treat_whitespace_as_suffix or norm.escape_whitespaces is False:
    raise UserError(f"{vocab.path} does not mark words with a leading {METASPACE} "
                    "(treat_whitespace_as_suffix or no escape_whitespaces); transformers' "
                    "Metaspace cannot reproduce it")
  steps: list[dict] = []
  if vocab.spec.lower_case:
    # Ours lower-cases with ICU (tf.strings.lower), whose Σ at the end of a word becomes ς;
    # `tokenizers` lower-cases letter by letter (σ), so that Σ is replaced first.
    steps += [{"type": "Replace", "pattern": {"Regex": _FINAL_SIGMA}, "content": "ς"},
              {"type": "Lowercase"}]
  if norm.precompiled_charsmap:
    steps.append({"type": "Precompiled", "precompiled_charsmap":
                  base64.b64encode(norm.precompiled_charsmap).decode("ascii")})
  if norm.remove_extra_whitespaces:
    # sentencepiece drops leading and trailing spaces and folds runs into one.
    steps += [{"type": "Strip", "strip_left": True, "strip_right": True},
              {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]
  scheme = "always" if norm.add_dummy_prefix else "never"
  metaspace = {"replacement": METASPACE, "prepend_scheme": scheme,
               "split": bool(trainer.split_by_whitespace)}
  pieces = [[p.piece, p.score] for p in proto.pieces]
  cls, sep = vocab.cls_id, vocab.sep_id
  return {
      "version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [{"id": _id(vocab, t), **_added(t)} for t in SPECIAL_TOKENS],
      "normalizer": {"type": "Sequence", "normalizers": steps} if steps else None,
      "pre_tokenizer": {"type": "Metaspace", **metaspace},
      "post_processor": {
          "type": "TemplateProcessing",
          "single": [_special(CLS, 0), _seq("A", 0), _special(SEP, 0)],
          "pair": [_special(CLS, 0), _seq("A", 0), _special(SEP, 0), _seq("B", 1),
                   _special(SEP, 1)],
          "special_tokens": {CLS: {"id": CLS, "ids": [cls], "tokens": [CLS]},
                             SEP: {"id": SEP, "ids": [sep], "tokens": [SEP]}}},
      "decoder": {"type": "Metaspace", **metaspace},
      "model": _bpe(proto, vocab) if trainer.model_type == _BPE else
               {"type": "Unigram", "unk_id": vocab.unk_id, "vocab": pieces,
                "byte_fallback": bool(trainer.byte_fallback)},
  }


def _bpe(proto, vocab: Vocab) -> dict:
  """The BPE model of a SentencePiece BPE proto. sentencepiece merges, at each step, the
  adjacent pair whose concatenation is the highest-scoring piece; `tokenizers` merges the
  pair of lowest rank: so every split of a normal piece into two normal pieces is a merge,
  ranked by the piece's score (as transformers' SentencePieceExtractor derives them)."""
  ids = {p.piece: i for i, p in enumerate(proto.pieces)}
  normal = {p.piece: p.score for p in proto.pieces if p.type == 1}
  merges = []
  for piece, score in normal.items():
    for cut in range(1, len(piece)):
      left, right = piece[:cut], piece[cut:]
      if left in normal and right in normal:
        merges.append((-score, ids[left], ids[right], left, right))
  merges.sort()
  return {"type": "BPE", "dropout": None, "unk_token": vocab.tokens[vocab.unk_id],
          "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
          "byte_fallback": bool(proto.trainer_spec.byte_fallback), "ignore_merges": False,
          "vocab": ids, "merges": [[m[3], m[4]] for m in merges]}


def _special(token: str, type_id: int) -> dict:
  return {"SpecialToken": {"id": token, "type_id": type_id}}


def _seq(which: str, type_id: int) -> dict:
  return {"Sequence": {"id": which, "type_id": type_id}}
