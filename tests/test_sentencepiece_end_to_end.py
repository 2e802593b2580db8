"""A SentencePiece vocab through the whole journey: learn it, build data, pretrain, resume,
fine-tune, export a SavedModel whose raw-text signature tokenizes in the graph, and export
to Hugging Face, read back by transformers with our ids."""

import io
import json
import random
import types

import pytest
import tensorflow as tf

from electra_tf import filenames
from electra_tf.checkpoints import converter
from electra_tf.config import FinetuneConfig
from electra_tf.data import pretraining_data
from electra_tf.data.tokenizer import SentencePieceTokenizer, make_tokenizer
from electra_tf.data.tokenizer_spec import TokenizerSpec
from electra_tf.data.vocab import load_vocab
from electra_tf.data.vocab_learning import learn_vocab
from electra_tf.presets import get as get_preset
from electra_tf.tasks import runner
from electra_tf.training import pretraining
from electra_tf.training.pretraining import TrainData

transformers = pytest.importorskip("transformers")
SYLLABLES = ["ka", "to", "ri", "mu", "se", "no", "ha", "ki", "yo", "ne", "su", "mi"]


def _word(rng: random.Random) -> str:
  return "".join(rng.choices(SYLLABLES, k=rng.randint(1, 3)))


def test_sentencepiece_journey(tmp_path):
  rng = random.Random(0)
  corpus = tmp_path / "corpus.txt"
  documents = ["\n".join(" ".join(_word(rng) for _ in range(rng.randint(4, 14)))
                         for _ in range(rng.randint(2, 6))) for _ in range(60)]
  corpus.write_text("\n\n".join(documents) + "\n")
  vocab = learn_vocab(str(corpus), 120, TokenizerSpec.create("sentencepiece", False),
                      output_path=str(tmp_path / "spm.model"))
  assert vocab.spec.kind == "sentencepiece" and vocab.mask_id == 4
  tokenizer = make_tokenizer(vocab)
  assert isinstance(tokenizer, SentencePieceTokenizer)

  # Data and pretraining, stopped at step 4 and resumed to 6.
  manifest = pretraining_data.build_pretraining_data(
      str(corpus), vocab, str(tmp_path / "data"), max_seq_length=32, show_progress=False)
  assert manifest.spec() == vocab.spec
  data = TrainData(manifest.shard_paths, vocab, manifest.examples, manifest.tokens)
  model_dir = str(tmp_path / "run")
  config = get_preset("tiny").replace(
      **{"model.vocab_size": vocab.size}, max_seq_length=32, batch_size=4, num_train_steps=4,
      warmup_steps=2, checkpoint_steps=2, steps_per_execution=1, log_steps=2)
  strategy = tf.distribute.get_strategy()
  pretraining.run_pretraining(config, data, model_dir, strategy, stream=io.StringIO(),
                              fused_kernels=False)
  out = io.StringIO()
  result = pretraining.run_pretraining(config.replace(num_train_steps=6), data, model_dir,
                                       strategy, stream=out, fused_kernels=False)
  assert result.start_step == 4, out.getvalue()
  export = f"{model_dir}/{filenames.DISCRIMINATOR_SUBDIR}"
  assert load_vocab(f"{export}/spm.model").spec == vocab.spec

  # Fine-tuning from the export tokenizes with the SentencePiece model.
  reviews = tmp_path / "reviews.tsv"
  rows = ["sentence\tlabel"] + [f"{' '.join(_word(rng) for _ in range(5))}"
                                f"{' kato' if i % 2 else ''}\t{i % 2}" for i in range(32)]
  reviews.write_text("\n".join(rows) + "\n")
  flags_ = types.SimpleNamespace(
      strategy="one_device", tpu=None, cpu_devices=0, init_checkpoint=export,
      model_size="tiny", vocab_file=None, train_file=str(reviews), dev_file=str(reviews),
      text_columns=["sentence"], label_column="label", regression=False,
      max_train_examples=None, max_eval_examples=None, output_dir=str(tmp_path / "ft"),
      tfds_data_dir=None, cache_dir=None, task="classification")

  def finetune_config(num_layers):
    return FinetuneConfig(task="classification", max_seq_length=16, batch_size=8,
                          eval_batch_size=16, num_train_epochs=1.0, learning_rate=1e-3)

  runner.run_from_flags(flags_, finetune_config, stream=io.StringIO())
  best = str(tmp_path / "ft" / filenames.BEST_SUBDIR)
  assert load_vocab(f"{best}/spm.model").spec == vocab.spec

  # The SavedModel's raw-text signature equals the Keras model on the Python tokenizer's ids.
  from electra_tf.serving import saved_model
  from electra_tf.tasks import classification_data
  from electra_tf.training.finetuned import load_finetuned

  served = tf.saved_model.load(saved_model.export_finetuned(best, str(tmp_path / "serving")))
  texts = ["kato rimu se", "ha ki yo ne su mi kato"]
  got = served.signatures["classify_text"](text=tf.constant(texts))
  model, record = load_finetuned(best)
  examples = [classification_data.Example(texts=(t,), label=0) for t in texts]
  task_spec = classification_data.TaskSpec(**record["spec"])
  features = classification_data.encode(examples, make_tokenizer(vocab), 16, task_spec)
  expected = model({k: tf.constant(v) for k, v in features.items() if k != "label_ids"},
                   training=False)
  tf.debugging.assert_near(got["probabilities"], expected["probabilities"], atol=1e-5)

  # Hugging Face: the exported folder's tokenizer gives our ids.
  hf_dir = str(tmp_path / "hf")
  converter.convert(None, "hf", model_dir, hf_dir)
  reference = transformers.AutoTokenizer.from_pretrained(f"{hf_dir}/discriminator")
  lines = [line for line in corpus.read_text().splitlines() if line][:40]
  assert make_tokenizer(vocab).tokenize(lines).to_list() == [
      reference(line, add_special_tokens=False)["input_ids"] for line in lines]
  config = json.loads((tmp_path / "hf" / "discriminator" / "tokenizer_config.json").read_text())
  assert config["mask_token"] == "[MASK]"
