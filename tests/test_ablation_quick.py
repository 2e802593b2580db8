"""bench/quality/ablation.py's whole pipeline on a toy budget: every arm wired as the study says."""

import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "quality"))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
  import ablation

  workdir = str(tmp_path_factory.mktemp("ablation"))
  result = ablation.run_study("objectives", workdir, quick=True, log=lambda line: None)
  return ablation, os.path.join(workdir, "objectives"), result


def test_objective_arms_share_one_flop_budget(study):
  ablation, workdir, result = study
  records = {arm.name: json.load(open(os.path.join(workdir, arm.name, "done.json")))
             for arm in ablation.arms("objectives", quick=True)}
  budget = records["electra"]["flops"]
  for name, record in records.items():
    per_step = record["flops"] / record["steps"]
    # Equal up to the rounding of steps to whole quarters.
    assert budget - 4 * per_step <= record["flops"] <= budget, name
  # A costlier step means no more steps; the MLM baseline's step is the cheapest.
  per_step = {name: r["flops"] / r["steps"] for name, r in records.items()}
  assert per_step["all_tokens_mlm"] > per_step["electra"] > per_step["mlm"]
  steps = {name: r["steps"] for name, r in records.items()}
  assert steps["all_tokens_mlm"] <= steps["electra"] <= steps["mlm"]


def test_each_arm_trained_what_it_says(study):
  ablation, workdir, result = study
  metrics = {arm.name: json.load(open(os.path.join(workdir, arm.name, "done.json")))[
      "final_metrics"] for arm in ablation.arms("objectives", quick=True)}
  for name in ("electra", "electra_15", "two_stage"):
    assert "disc_auc" in metrics[name] and "mlm_accuracy" not in metrics[name], name
  for name in ("replace_mlm", "all_tokens_mlm"):
    assert "mlm_accuracy" in metrics[name] and "disc_auc" not in metrics[name], name
  assert "disc_auc" not in metrics["mlm"] and "sampled_accuracy" not in metrics["mlm"]


def test_two_stage_arm_froze_its_generator(study):
  import tensorflow as tf

  _, workdir, _ = study
  config = json.load(open(os.path.join(workdir, "two_stage", "config.json")))["pretrain"]
  boundary, last = config["two_stage_steps"], config["num_train_steps"]
  ckpt = os.path.join(workdir, "two_stage", "checkpoints")
  before = tf.train.load_checkpoint(os.path.join(ckpt, f"ckpt-{boundary}"))
  after = tf.train.load_checkpoint(os.path.join(ckpt, f"ckpt-{last}"))
  names = [n for n in before.get_variable_to_shape_map() if n.endswith("VARIABLE_VALUE")
           and "OPTIMIZER_SLOT" not in n]
  generator = [n for n in names if n.startswith("model/generator/")]
  discriminator = [n for n in names if n.startswith("model/discriminator/")]
  assert generator and discriminator
  for name in generator:
    np.testing.assert_array_equal(before.get_tensor(name), after.get_tensor(name), name)
  assert any(np.any(before.get_tensor(n) != after.get_tensor(n)) for n in discriminator)


def test_every_encoder_fine_tuned_with_every_seed(study):
  ablation, workdir, result = study
  rows = result["rows"]
  expected = {"random", *(arm.name for arm in ablation.arms("objectives", quick=True)),
              *(f"{arm}@{f}%" for arm in ("electra", "mlm") for f in (50,))}
  assert set(rows) == expected
  for name, row in rows.items():
    for task in ("movie_reviews", "trec"):
      assert len(row[task]["seeds"]) == len(ablation.QUICK_SEEDS), (name, task)
      assert all(0.0 <= s <= 100.0 for s in row[task]["seeds"])
  # Partial checkpoints sit at their share of the arm's FLOPs.
  assert rows["electra@50%"]["pretrain_flops"] * 2 == rows["electra"]["pretrain_flops"]
  for suffix in (".json", ".md", ".png"):
    assert os.path.getsize(os.path.join(workdir, f"ablation_objectives{suffix}")) > 0


def test_rerun_resumes_without_retraining(study):
  ablation, workdir, result = study
  done = os.path.join(workdir, "electra", "done.json")
  stamp = os.path.getmtime(done)
  assert result["meta"]["wall_time"].endswith("min in the last invocation that ran arms")
  # A rerun that runs nothing rewrites the tables under the header of the runs that did.
  tables = os.path.join(workdir, "ablation_objectives.json")
  with open(tables, encoding="utf-8") as f:
    written = json.load(f)
  ran = {"command": "the run's command", "commit": "abc1234", "cpu": "the run's CPU",
         "wall_time": "42 min in the last invocation that ran arms"}
  with open(tables, "w", encoding="utf-8") as f:
    json.dump({**written, "meta": {**written["meta"], **ran}}, f)
  again = ablation.run_study("objectives", os.path.dirname(workdir), quick=True,
                             log=lambda line: None)
  assert os.path.getmtime(done) == stamp
  assert again["rows"]["electra"]["movie_reviews"] == result["rows"]["electra"]["movie_reviews"]
  assert {k: again["meta"][k] for k in ran} == ran
  assert set(again["rows"]) == set(result["rows"])
  # An invocation given some arms tabulates every finished arm (a process beside it may
  # have run the others) and names as pending only those it was given.
  some = ablation.run_study("objectives", os.path.dirname(workdir), quick=True,
                            log=lambda line: None, only_arms=["electra"])
  assert set(some["rows"]) == set(result["rows"]) and some["pending_arms"] == []


def test_part_of_a_checkpoint_restores_only_that_part(study):
  import study_lib

  from electra_tf.config import EncoderConfig

  _, workdir, _ = study
  source = os.path.join(workdir, "mlm", "discriminator")
  with open(os.path.join(source, "config.json")) as f:
    config = EncoderConfig(**json.load(f)["encoder"])
  whole = study_lib.encoder_weights(config, source, seed=3)
  drawn = study_lib.encoder_weights(config, None, seed=3)
  embeddings = study_lib.encoder_weights(config, source, seed=3, part="embeddings")
  layers = study_lib.encoder_weights(config, source, seed=3, part="layers")
  names = [v.name for v in study_lib.built_encoder(config).weights]
  assert any("embeddings" in n for n in names) and any("layer" in n for n in names)
  differs = {"embeddings" in n for n, w, d in zip(names, whole, drawn)
             if not np.array_equal(w, d)}
  assert differs == {True, False}  # pretraining changed both parts, so the checks can fail
  for name, w, d, emb, lay in zip(names, whole, drawn, embeddings, layers, strict=True):
    pretrained, other = (emb, lay) if "embeddings" in name else (lay, emb)
    np.testing.assert_array_equal(pretrained, w, err_msg=name)
    np.testing.assert_array_equal(other, d, err_msg=name)
  with pytest.raises(ValueError, match="unknown encoder part"):
    study_lib.encoder_weights(config, source, seed=3, part="heads")



def test_word_order_probe_reads_every_checkpoint_of_a_run(study):
  import word_order

  from electra_tf.data import pipeline
  from electra_tf.data.vocab import load_vocab

  ablation, workdir, result = study
  run = os.path.join(workdir, "electra")
  config = json.load(open(os.path.join(run, "config.json")))["pretrain"]
  vocab = load_vocab(os.path.join(run, "discriminator", "vocab.txt"))
  data = os.path.join(os.path.dirname(workdir), "data")
  dataset = pipeline.make_pretraining_dataset(
      data, batch_size=8, max_seq_length=config["max_seq_length"],
      max_predictions_per_seq=config["max_predictions_per_seq"], mask_prob=0.15, vocab=vocab,
      seed=0)
  batches = [{k: v.numpy() for k, v in b.items()} for b in dataset.take(2)]
  shuffled = [word_order.shuffled(b, np.random.default_rng(0)) for b in batches]
  rows = word_order.probe_run(run, batches, shuffled, log=lambda line: None)
  assert [r["step"] for r in rows] == [s for s, _ in word_order.checkpoints_of(run)]
  assert len(rows) >= 2 and rows[-1]["step"] == config["num_train_steps"]
  for row in rows:
    assert 0 <= row["gen_accuracy_shuffled"] <= 1 and 0 <= row["disc_auc"] <= 1
  # Checkpoints differ, so their scores do.
  assert len({(r["gen_accuracy"], r["disc_auc"]) for r in rows}) > 1
