"""Helpers shared by tests (importable as `testing_utils`: tests/ is on sys.path)."""

import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_batch(config, seed: int = 0, batch_size: int | None = None):
  """A fixed pretraining batch (numpy) with [CLS]=1, [SEP]=2, [MASK]=3 and padding 0."""
  from electra_tf import features as F

  rng = np.random.default_rng(seed)
  B = batch_size or config.batch_size
  L, P, V = config.max_seq_length, config.max_predictions_per_seq, config.model.vocab_size
  ids = np.zeros((B, L), np.int32)
  mask = np.zeros((B, L), np.int32)
  segments = np.zeros((B, L), np.int32)
  positions = np.zeros((B, P), np.int32)
  masked_ids = np.zeros((B, P), np.int32)
  weights = np.zeros((B, P), np.float32)
  for b in range(B):
    n = int(rng.integers(P + 3, L + 1))
    ids[b, :n] = rng.integers(4, V, size=n)
    ids[b, 0], ids[b, n - 1] = 1, 2
    mask[b, :n] = 1
    segments[b, n // 2:n] = 1
    k = int(rng.integers(1, P + 1))
    chosen = np.sort(rng.choice(np.arange(1, n - 1), size=k, replace=False))
    positions[b, :k], masked_ids[b, :k], weights[b, :k] = chosen, ids[b, chosen], 1.0
  masked_input = ids.copy()
  for b in range(B):
    for p in range(P):
      if weights[b, p] and rng.random() < 0.85:
        masked_input[b, positions[b, p]] = 3
  return {F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: segments,
          F.MASKED_INPUT_IDS: masked_input, F.MASKED_LM_POSITIONS: positions,
          F.MASKED_LM_IDS: masked_ids, F.MASKED_LM_WEIGHTS: weights}


def assert_clear_error(result, *needles):
  """A CLI run failed as users should see it: exit 2 and one `error:` line with `needles`."""
  assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: "), last
  for needle in needles:
    assert needle in last, last
  return last


def xla_compiled_functions(fn) -> list[str]:
  """Names of the functions in fn's traced graph that are marked for XLA compilation."""
  import tensorflow as tf

  library = tf.function(fn).get_concrete_function().graph.as_graph_def().library
  return [f.signature.name for f in library.function if f.attr["_XlaMustCompile"].b]


# Every command as a user starts it from a checkout (installed: electra-<name>).
COMMANDS = {
    "pretrain": [os.path.join(ROOT, "pretrain.py")],
    "finetune": [os.path.join(ROOT, "finetune.py")],
    "build_data": ["-m", "electra_tf.commands.build_data"],
    "learn_vocab": ["-m", "electra_tf.commands.learn_vocab"],
    "convert": ["-m", "electra_tf.commands.convert"],
    "export": ["-m", "electra_tf.commands.export"],
    "saved_model_cli": ["-m", "electra_tf.commands.saved_model_cli"],
    # pretrain.py with a SIGKILL during one save (its first argument is STEP:SECONDS).
    "pretrain_killed_during_save": [os.path.join(ROOT, "tests", "training",
                                                 "kill_during_save.py")],
}


def command_line(name: str, *args) -> list[str]:
  """The argv that starts command `name` with `args` in a fresh Python process.

  Pretraining runs the tiny preset unless `args` pick one: the default preset (the demo)
  is sized for a few minutes of real learning, not for tests. It runs without the fused
  GELU and dropout kernels unless `args` say otherwise: their XLA compiles cost a run about
  12 s here, and the tests that cover them ask for them.
  """
  import sys

  args = [str(a) for a in args]
  if name.startswith("pretrain") and not any(a.startswith("--model_size") for a in args):
    args.append("--model_size=tiny")
  if name.startswith("pretrain") and not any("fused_kernels" in a for a in args):
    args.append("--nofused_kernels")
  return [sys.executable, *COMMANDS[name], *args]


def command_env(**extra) -> dict[str, str]:
  """The environment commands run in: the tests', with TensorFlow's C++ logging off (as the
  commands set it themselves when it is unset) and this checkout importable."""
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT, **extra}


def run_command(name: str, *args, timeout: float = 600, cwd: str = ROOT, env=None, **kwargs):
  """Runs command `name` as a user does and waits: subprocess.CompletedProcess with its exit
  code, stdout and stderr as text. `kwargs` go to subprocess.run (e.g. preexec_fn)."""
  import subprocess

  return subprocess.run(command_line(name, *args), cwd=cwd, env=env or command_env(),
                        capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
