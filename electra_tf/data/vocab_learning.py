"""Learning a vocab from text (electra-learn-vocab): WordPiece with tf.text's BERT vocab
learner over our own word splitting, or a SentencePiece model; the spec is written beside it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from electra_tf import fileio
from electra_tf.data import io_utils
from electra_tf.data import tokenizer_spec as spec_lib
from electra_tf.data.tokenizer_spec import SENTENCEPIECE, TokenizerSpec
from electra_tf.data.vocab import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK, Vocab, load_vocab
from electra_tf.errors import UserError


def _text_batches(files: Sequence[str], batch_lines: int = 1024) -> Iterator[list[str]]:
  """Non-empty lines of `files` in batches, decoded with errors naming file and byte."""
  batch = []
  for path in files:
    for offset, raw in io_utils.iter_raw_lines(path):
      line = io_utils.decode_line(raw, path, offset).strip()
      if line:
        batch.append(line)
        if len(batch) == batch_lines:
          yield batch
          batch = []
  if batch:
    yield batch


def corpus_chars(text_files: str | Sequence[str]) -> set[str]:
  """Every distinct character of the (UTF-8, checked) text files."""
  chars: set[str] = set()
  for batch in _text_batches(io_utils.expand_patterns(text_files)):
    for line in batch:
      chars.update(line)
  return chars


def learn_vocab(text_files: str | Sequence[str], vocab_size: int, spec: TokenizerSpec, *,
                output_path: str, model_type: str = "unigram", stream=None) -> Vocab:
  """Learns a vocab of `spec.kind` from text and writes it with its spec beside it.

  WordPiece: tf.text's BERT vocab learner over the words our tokenizer splits with `spec`;
  the special tokens take ids 0..4 ([PAD] [UNK] [CLS] [SEP] [MASK]), then every character
  seen (alone and as a `##` suffix), then the most useful word pieces. SentencePiece: the
  sentencepiece trainer (`model_type` unigram or bpe) with the same special tokens at ids
  0..4, writing a .model file.

  Args:
    text_files: globs (a list, or comma-separated) of UTF-8 text files.
    vocab_size: the largest vocab wanted (WordPiece lands within 5% below it).
    spec: the tokenizer settings; see `tokenizer_spec.choose_for_corpus` for defaults.
    output_path: where to write the vocab (atomically); the spec goes beside it.
    model_type: SentencePiece's algorithm, "unigram" or "bpe".

  Returns:
    The written vocab, loaded and checked.
  """
  if vocab_size < len(SPECIAL_TOKENS) + 1:
    raise UserError(f"--vocab_size={vocab_size} is too small; use at least a few thousand")
  fileio.check_path(output_path, "--output")
  files = io_utils.expand_patterns(text_files)
  # A checking pass first: inside tf.data a bad byte would surface as an opaque op error.
  if not sum(len(batch) for batch in _text_batches(files)):
    raise UserError(f"no text in {', '.join(files)}; give non-empty UTF-8 text files")
  if spec.kind == SENTENCEPIECE:
    data = _learn_sentencepiece(files, vocab_size, spec, model_type)
    io_utils.atomic_write_bytes(output_path, data)
  else:
    tokens = _learn_wordpiece(files, vocab_size, spec)
    io_utils.atomic_write_text(output_path, "".join(f"{t}\n" for t in tokens))
  spec_lib.write_spec(spec, output_path)
  return load_vocab(output_path)


def _learn_wordpiece(files: Sequence[str], vocab_size: int, spec: TokenizerSpec) -> list[str]:
  # Imported only now: loading a vocab or rejecting bad input must not wait for TF.
  import collections

  from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

  from electra_tf.data.bert_text import BasicTokenizer

  basic = BasicTokenizer(spec)
  counts: collections.Counter = collections.Counter()
  for batch in _text_batches(files):
    counts.update(basic.split(batch).strings.numpy().tolist())
  counts = collections.Counter({w.decode("utf-8"): n for w, n in counts.items()})
  # The learner's default floor of 10 occurrences starves small corpora; 2 still keeps
  # one-off strings out. Its alphabet cap of 1000 characters would drop most words of
  # Chinese, Japanese or Korean text: allow a quarter of the vocab.
  return learner.learn(counts, vocab_size, list(SPECIAL_TOKENS), lower_thresh=2,
                       max_unique_chars=max(1000, vocab_size // 4))


def _learn_sentencepiece(files: Sequence[str], vocab_size: int, spec: TokenizerSpec,
                         model_type: str) -> bytes:
  import io

  import sentencepiece

  if model_type not in ("unigram", "bpe"):
    raise UserError(f"--model_type={model_type} is not a SentencePiece algorithm; use "
                    "unigram or bpe")
  lines = (line.lower() if spec.lower_case else line
           for batch in _text_batches(files) for line in batch)
  model = io.BytesIO()
  try:
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=lines, model_writer=model, vocab_size=vocab_size,
        model_type=model_type, character_coverage=0.9995, pad_id=0, pad_piece=PAD,
        unk_id=1, unk_piece=UNK, bos_id=2, bos_piece=CLS, eos_id=3, eos_piece=SEP,
        user_defined_symbols=[MASK], minloglevel=2)
  except RuntimeError as e:
    reason = str(e).split("]")[-1].strip().split(". Increase")[0]  # sentencepiece's own words
    raise UserError(f"SentencePiece could not learn a vocab of {vocab_size}: {reason}; "
                    "change --vocab_size or give more text") from None
  return model.getvalue()
