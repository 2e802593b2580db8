r"""Korean, Chinese, Japanese and German (and Japanese with SentencePiece) end to end: learn a
vocab with the defaults, build held-out data, pretrain the demo preset, export to Hugging Face
and read it back with transformers, export a SavedModel and read it back with TensorFlow.

  .venv/bin/python bench/languages/languages.py [--runs=ko,ja_sp] [--num_train_steps=N]

Per run (ko, zh, ja, de with WordPiece; ja_sp with SentencePiece), on the packaged corpora of
`electra_tf.data.corpora` (every tenth document held out):

1. vocab: `electra-learn-vocab` with its default settings (the settings it chose are read
   from the vocab.tokenizer.json it writes, with the line it printed about them);
2. held-out data: `electra-build-data` on the held-out documents at the demo's 32 tokens;
3. pretrain: `pretrain.py` (demo preset) on the training documents with the vocab's size,
   evaluated on that held-out data; its last held-out generator accuracy and frequency
   baseline are parsed from the log;
4. hf: `electra-convert --to=hf`; `AutoTokenizer.from_pretrained` on the discriminator folder
   against our tokenizer (`make_tokenizer`) on every held-out line, [CLS] and [SEP]
   included; `ElectraForPreTraining.from_pretrained` with its loading report (missing,
   unexpected, mismatched weights) and its logits against our Keras discriminator's on the
   first 256 held-out lines;
5. saved_model: `electra-export --task=pretraining`; its `detect_text` signature on every
   held-out line: ids (without [CLS], [SEP] and padding) against our tokenizer's cut to the
   signature's length, and replaced-token logits against the Keras discriminator's on the
   signature's own inputs.

Each finished stage is recorded in <work_dir>/<run>/stages.json and skipped when the script
runs again (--redo=hf,saved_model runs stages again). After every stage the table of all runs
is written to bench/results/languages/languages.{json,md}.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
RESULTS = os.path.join(ROOT, "bench", "results", "languages")
STAGES = ("vocab", "data", "pretrain", "hf", "saved_model")
NEEDS = {"data": "vocab", "pretrain": "data", "hf": "pretrain", "saved_model": "pretrain"}
# run -> (language, vocab kind, vocab size asked for): WordPiece sizes as the corpora allow
# (ko and ja are ~70-80 KB of text, de 1.7 MB, zh 3.4 MB).
RUNS = {
    "ko": ("ko", "wordpiece", 3000),
    "ja": ("ja", "wordpiece", 3000),
    "ja_sp": ("ja", "sentencepiece", 3000),
    "de": ("de", "wordpiece", 8000),
    "zh": ("zh", "wordpiece", 8000),
}
# SentencePiece's longer pieces pack the Japanese held-out text into 63 examples, one short of
# the demo's batch of 64 that held-out evaluation reads whole; its run uses batches of 32.
PRETRAIN_ARGS = {"ja_sp": ["--batch_size=32"]}
MAX_SEQ_LENGTH = 32  # the demo preset's
LOGIT_LINES = 256

FLAGS = flags.FLAGS
flags.DEFINE_list("runs", list(RUNS), f"Runs to do, in order: {', '.join(RUNS)}.")
flags.DEFINE_string("work_dir", os.path.join(ROOT, "runs", "languages"),
                    "Vocabs, data, runs and exports, one folder per run.")
flags.DEFINE_string("results_dir", RESULTS, "Where the table goes.")
flags.DEFINE_integer("num_train_steps", None, "Pretraining steps (default: the demo's 1,500).")
flags.DEFINE_list("redo", [], f"Stages to run again even if recorded: {', '.join(STAGES)}.")
flags.DEFINE_list("stages", list(STAGES), "Stages to run (later ones need the earlier).")


def say(message: str) -> None:
  stamp = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
  print(f"[{stamp}] {message}", flush=True)


def command(args: list[str], log_path: str) -> str:
  """Runs a command with its output going to log_path (and our stdout); returns the output.
  A failure raises with the command's last line."""
  say("$ " + " ".join(args))
  lines = []
  with open(log_path, "a", encoding="utf-8") as log:
    log.write(f"\n$ {' '.join(args)}\n")
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "CUDA_VISIBLE_DEVICES": "",
                                    "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
    for line in process.stdout:
      log.write(line)
      log.flush()
      lines.append(line)
      if not re.match(r"(WARNING|[IWE]\d{4} |\d{4}-\d\d-\d\d |To enable )", line):
        print("    " + line, end="", flush=True)
    if process.wait():
      last = next((x.strip() for x in reversed(lines) if x.strip()), "")
      raise RuntimeError(f"{args[0]} exited with {process.returncode}: {last}")
  return "".join(lines)


class Run:
  """One language run: its folder, its recorded stages."""

  def __init__(self, name: str, work_dir: str):
    self.name = name
    self.language, self.kind, self.vocab_size = RUNS[name]
    self.dir = os.path.join(work_dir, name)
    os.makedirs(self.dir, exist_ok=True)
    self.state_path = os.path.join(self.dir, "stages.json")
    self.stages = {}
    if os.path.exists(self.state_path):
      with open(self.state_path, encoding="utf-8") as f:
        self.stages = json.load(f)
    self.log = os.path.join(self.dir, "log.txt")
    self.vocab = os.path.join(self.dir, "spm.model" if self.kind == "sentencepiece"
                              else "vocab.txt")
    self.held = os.path.join(self.dir, "held_out_data")
    self.model_dir = os.path.join(self.dir, "run")
    self.hf_dir = os.path.join(self.dir, "hf")
    self.sm_dir = os.path.join(self.dir, "saved_model")

  def record(self, stage: str, values: dict) -> None:
    self.stages[stage] = {**values, "finished": datetime.datetime.now(
        datetime.UTC).isoformat(timespec="seconds")}
    with open(self.state_path + ".tmp", "w", encoding="utf-8") as f:
      json.dump(self.stages, f, indent=2, ensure_ascii=False)
    os.replace(self.state_path + ".tmp", self.state_path)


def corpus(language: str, split: str) -> str:
  from electra_tf.data.corpora import language_corpus

  return language_corpus(language, split)


def held_out_lines(language: str) -> list[str]:
  with open(corpus(language, "held_out"), encoding="utf-8") as f:
    return [line.strip() for line in f if line.strip()]


def stage_vocab(run: Run) -> dict:
  args = [os.path.join(BIN, "electra-learn-vocab"),
          f"--input_files={corpus(run.language, 'train')}",
          f"--vocab_size={run.vocab_size}", f"--output={run.vocab}"]
  if run.kind == "sentencepiece":
    args.append("--kind=sentencepiece")
  out = command(args, run.log)
  from electra_tf.data.vocab import load_vocab

  vocab = load_vocab(run.vocab)
  said = [line.strip() for line in out.splitlines() if line.startswith("accent stripping")]
  return {"size": vocab.size, "spec": vocab.spec.to_dict(), "settings": vocab.spec.describe(),
          "said": said[0] if said else ""}


def stage_data(run: Run) -> dict:
  command([os.path.join(BIN, "electra-build-data"),
           f"--input_files={corpus(run.language, 'held_out')}", f"--vocab_file={run.vocab}",
           f"--output_dir={run.held}", f"--max_seq_length={MAX_SEQ_LENGTH}", "--overwrite"],
          run.log)
  with open(os.path.join(run.held, "manifest.json"), encoding="utf-8") as f:
    manifest = json.load(f)
  return {"examples": manifest["examples"], "tokens": manifest["tokens"],
          "documents": manifest["documents"]}


_EVAL = re.compile(r"eval step (\d+) \|.*?gen_accuracy ([\d.]+) \(frequency baseline ([\d.]+)\)"
                   r"(?:.*?disc_auc ([\d.]+))?")


def stage_pretrain(run: Run) -> dict:
  size = run.stages["vocab"]["size"]
  args = [sys.executable, "pretrain.py", f"--text_files={corpus(run.language, 'train')}",
          f"--vocab_file={run.vocab}", f"--eval_data={run.held}", f"--model_dir={run.model_dir}",
          "--config_overrides=" + json.dumps({"model.vocab_size": size})]
  args += PRETRAIN_ARGS.get(run.name, [])
  if FLAGS.num_train_steps:
    args.append(f"--num_train_steps={FLAGS.num_train_steps}")
  started = time.time()
  out = command(args, run.log)
  evals = _EVAL.findall(out)
  if not evals:  # the run had finished before: evaluate its last checkpoint
    out = command(args + ["--eval_only"], run.log)
    evals = _EVAL.findall(out)
  if not evals:
    raise RuntimeError(f"no held-out evaluation line in the output of {run.name}'s run")
  step, accuracy, baseline, auc = evals[-1]
  summary = [line.strip() for line in out.splitlines() if line.startswith("held-out")]
  with open(os.path.join(run.model_dir, "config.json"), encoding="utf-8") as f:
    steps = json.load(f)["pretrain"]["num_train_steps"]
  return {"step": int(step), "num_train_steps": steps, "args": args[2:],
          "gen_accuracy": float(accuracy), "baseline": float(baseline),
          "ratio": float(accuracy) / float(baseline),
          "disc_auc": float(auc) if auc else None, "summary": summary,
          "minutes": round((time.time() - started) / 60, 1)}


def our_ids(vocab_path: str, lines: list[str]) -> list[list[int]]:
  from electra_tf.data.tokenizer import make_tokenizer
  from electra_tf.data.vocab import load_vocab

  tokenizer = make_tokenizer(load_vocab(vocab_path))
  ids = []
  for i in range(0, len(lines), 256):
    ids.extend(tokenizer.tokenize(lines[i:i + 256]).to_list())
  return ids


def packed(ids: list[list[int]], cls_id: int, sep_id: int):
  """[CLS] ids [SEP] cut to MAX_SEQ_LENGTH and padded: input_ids, input_mask, segment_ids."""
  import numpy as np

  n = len(ids)
  input_ids = np.zeros([n, MAX_SEQ_LENGTH], np.int32)
  for row, line in enumerate(ids):
    line = [cls_id, *line[:MAX_SEQ_LENGTH - 2], sep_id]
    input_ids[row, :len(line)] = line
  return {"input_ids": input_ids, "input_mask": (input_ids > 0).astype(np.int32),
          "segment_ids": np.zeros_like(input_ids)}


def keras_logits(model_dir: str, inputs: dict):
  import numpy as np

  from electra_tf.checkpoints import converter

  loaded = converter.load(model_dir)
  return np.asarray(loaded.discriminator(inputs, training=False))


def stage_hf(run: Run) -> dict:
  command([os.path.join(BIN, "electra-convert"), "--to=hf", f"--input={run.model_dir}",
           f"--output={run.hf_dir}", "--overwrite"], run.log)
  folder = os.path.join(run.hf_dir, "discriminator")
  with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
    config = json.load(f)
  if run.kind == "wordpiece" and "strip_accents" not in config:
    raise RuntimeError(f"{folder}/tokenizer_config.json carries no strip_accents: the export "
                       "does not write the tokenizer spec yet (hf_tokenizer)")
  import numpy as np
  import torch
  import transformers

  from electra_tf.data.vocab import find_vocab_file, load_vocab

  lines = held_out_lines(run.language)
  vocab_path = find_vocab_file(os.path.join(run.model_dir, "discriminator"))
  vocab = load_vocab(vocab_path)
  ours = [[vocab.cls_id, *ids, vocab.sep_id] for ids in our_ids(vocab_path, lines)]
  tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
  theirs = tokenizer(lines, add_special_tokens=True)["input_ids"]
  differ = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
  examples = [{"line": lines[i], "ours": vocab_tokens(vocab, ours[i]),
               "transformers": tokenizer.convert_ids_to_tokens(theirs[i])}
              for i in differ[:3]]
  model, info = transformers.ElectraForPreTraining.from_pretrained(
      folder, output_loading_info=True)
  model.eval()
  inputs = packed([ids[1:-1] for ids in ours[:LOGIT_LINES]], vocab.cls_id, vocab.sep_id)
  with torch.no_grad():
    hf_logits = model(input_ids=torch.from_numpy(inputs["input_ids"]).long(),
                      attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                      token_type_ids=torch.from_numpy(inputs["segment_ids"]).long()).logits
  mask = inputs["input_mask"].astype(bool)
  logit_diff = float(np.abs(hf_logits.numpy() - keras_logits(run.model_dir, inputs))[mask].max())
  return {"tokenizer_class": type(tokenizer).__name__, "lines": len(lines),
          "equal_lines": len(lines) - len(differ), "differences": examples,
          "missing_keys": list(info["missing_keys"]),
          "unexpected_keys": list(info["unexpected_keys"]),
          "mismatched_keys": [list(map(str, k)) for k in info["mismatched_keys"]],
          "logit_lines": len(mask), "max_logit_diff": logit_diff,
          "transformers": transformers.__version__}


def vocab_tokens(vocab, ids: list[int]) -> list[str]:
  return [vocab.tokens[i] for i in ids]


def stage_saved_model(run: Run) -> dict:
  import numpy as np
  import tensorflow as tf

  from electra_tf.data.vocab import find_vocab_file

  out = command([os.path.join(BIN, "electra-export"), f"--checkpoint={run.model_dir}",
                 "--task=pretraining", f"--export_dir={run.sm_dir}"], run.log)
  path = re.search(r"^exported (\S+)", out, re.M).group(1)
  lines = held_out_lines(run.language)
  vocab_path = find_vocab_file(os.path.join(run.model_dir, "discriminator"))
  ours = our_ids(vocab_path, lines)
  detect = tf.saved_model.load(path).signatures["detect_text"]
  served_ids, inputs, logits = [], {"input_ids": [], "input_mask": [], "segment_ids": []}, []
  for i in range(0, len(lines), 128):
    result = detect(text=tf.constant(lines[i:i + 128]))
    for key in inputs:
      inputs[key].append(result[key].numpy())
    logits.append(result["replaced_logits"].numpy())
  inputs = {key: np.concatenate(value) for key, value in inputs.items()}
  logits = np.concatenate(logits)
  for row, mask in zip(inputs["input_ids"], inputs["input_mask"], strict=True):
    served_ids.append([int(t) for t in row[mask > 0][1:-1]])
  width = inputs["input_ids"].shape[1]  # the export's sequence length
  cut = [ids[:width - 2] for ids in ours]
  differ = [i for i, (a, b) in enumerate(zip(cut, served_ids, strict=True)) if a != b]
  mask = inputs["input_mask"].astype(bool)
  diff = float(np.abs(logits - keras_logits(run.model_dir, inputs))[mask].max())
  return {"export": path, "lines": len(lines), "equal_lines": len(lines) - len(differ),
          "max_logit_diff": diff, "signature": "detect_text", "seq_length": width,
          "differences": [{"line": lines[i], "ours": cut[i], "served": served_ids[i]}
                          for i in differ[:3]]}


def git_commit() -> str:
  def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

  head = git("rev-parse", "--short", "HEAD").strip()
  dirty = git("status", "--porcelain", "--untracked-files=no", "--", "electra_tf").strip()
  return head + (" (+ uncommitted changes in electra_tf/)" if dirty else "")


def commit_at(finished: str) -> str:
  """The commit HEAD was at when a stage finished (the newest committed by then)."""
  out = subprocess.run(["git", "log", "-1", f"--before={finished}", "--format=%h"], cwd=ROOT,
                       capture_output=True, text=True).stdout.strip()
  return out or "?"


def cpu_model() -> str:
  out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
  match = re.search(r"^Model name:\s*(.+)$", out, re.M)
  return match.group(1).strip() if match else platform.processor()


def write_table(work_dir: str) -> None:
  rows = {}
  for name in RUNS:
    state = os.path.join(work_dir, name, "stages.json")
    if os.path.exists(state):
      with open(state, encoding="utf-8") as f:
        rows[name] = json.load(f)
  for stages in rows.values():
    for record in stages.values():
      record.setdefault("commit", commit_at(record["finished"]))
  os.makedirs(FLAGS.results_dir, exist_ok=True)
  meta = {"command": "nice -n 5 .venv/bin/python bench/languages/languages.py",
          "last_invocation": " ".join(["bench/languages/languages.py", *sys.argv[1:]]),
          "cpu": cpu_model(), "commit": git_commit()}
  with open(os.path.join(FLAGS.results_dir, "languages.json"), "w", encoding="utf-8") as f:
    json.dump({**meta, "runs": rows}, f, indent=2, ensure_ascii=False)
  table = ["| run | vocab | settings chosen | held-out gen_accuracy (frequency baseline, ratio) "
           "| held-out disc_auc | ids = transformers | HF weights, logits "
           "| SavedModel ids = ours | SavedModel logits |",
           "|---|---|---|---|---|---|---|---|---|"]
  for name, stages in rows.items():
    vocab, pre = stages.get("vocab"), stages.get("pretrain")
    hf, sm = stages.get("hf"), stages.get("saved_model")
    spec = vocab and vocab["spec"]
    settings = "" if not spec else (
        f"lower_case={spec['lower_case']}" + ("" if spec["kind"] == "sentencepiece" else
                                            f", strip_accents={spec['strip_accents']}, "
                                            f"split_cjk={spec['split_cjk']}"))
    cells = [name, f"{vocab['spec']['kind']} {vocab['size']:,}" if vocab else "", settings,
             (f"{pre['gen_accuracy']:.3f} ({pre['baseline']:.3f}, {pre['ratio']:.1f}x) at "
              f"step {pre['step']}" if pre else ""),
             f"{pre['disc_auc']:.3f}" if pre and pre.get("disc_auc") is not None else "",
             f"{hf['equal_lines']:,} / {hf['lines']:,}" if hf else "",
             ("none missing, unexpected or mismatched" if hf and not (
                 hf["missing_keys"] or hf["unexpected_keys"] or hf["mismatched_keys"])
              else (f"missing {len(hf['missing_keys'])}" if hf else "")) +
             (f"; logits within {hf['max_logit_diff']:.1e}" if hf else ""),
             f"{sm['equal_lines']:,} / {sm['lines']:,}" if sm else "",
             f"within {sm['max_logit_diff']:.1e}" if sm else ""]
    table.append("| " + " | ".join(cells) + " |")
  commits = sorted({r["commit"] for stages in rows.values() for r in stages.values()})
  text = "\n".join([f"`{meta['command']}` on {meta['cpu']}; stages ran on commits "
                    f"{', '.join(commits)} (per stage in languages.json), in a working tree "
                    "that also held other developers' uncommitted changes", "", *table, ""])
  with open(os.path.join(FLAGS.results_dir, "languages.md"), "w", encoding="utf-8") as f:
    f.write(text)


def main(argv):
  del argv
  unknown = sorted(set(FLAGS.runs) - set(RUNS)) + sorted(
      set(FLAGS.redo + FLAGS.stages) - set(STAGES))
  if unknown:
    sys.exit(f"unknown run or stage: {', '.join(unknown)}")
  work = {"vocab": stage_vocab, "data": stage_data, "pretrain": stage_pretrain,
          "hf": stage_hf, "saved_model": stage_saved_model}
  failed = []
  for name in FLAGS.runs:
    run = Run(name, FLAGS.work_dir)
    for stage in STAGES:
      if stage not in FLAGS.stages:
        continue
      if stage in run.stages and stage not in FLAGS.redo:
        say(f"{name}: {stage} done before")
        continue
      if stage in NEEDS and NEEDS[stage] not in run.stages:
        say(f"{name}: {stage} skipped: {NEEDS[stage]} has not finished")
        continue
      say(f"{name}: {stage} ...")
      started = time.time()
      try:
        values = work[stage](run)
      except Exception as e:  # noqa: BLE001 (the other runs go on; the line is reported)
        say(f"{name}: {stage} FAILED: {type(e).__name__}: {e}")
        failed.append(f"{name}/{stage}: {e}")
        continue
      run.record(stage, {**values, "seconds": round(time.time() - started)})
      say(f"{name}: {stage} done: " + json.dumps(
          {k: v for k, v in values.items() if k not in ("differences", "summary")},
          ensure_ascii=False)[:400])
      write_table(FLAGS.work_dir)
  write_table(FLAGS.work_dir)
  say(f"table: {os.path.join(FLAGS.results_dir, 'languages.md')}")
  if failed:
    say("failed: " + "; ".join(failed))
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)
