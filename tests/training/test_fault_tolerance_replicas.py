"""A kill and resume of pretrain.py on two CPU replicas (MirroredStrategy) is bit-exact.

Each replica applies the all-reduced gradients to its own copy of the weights, and a
checkpoint keeps only the first copy. Grappler can round the replicas' weight updates
differently, so the copies would drift an ulp apart and a resumed run would continue from
other weights than the run it replaced; `--deterministic` turns those rewrites off while the
run trains (`workers.replica_copies_kept_equal`). The run accumulates two micro-batches per
update, so the same kill and resume covers gradient accumulation: the micro-batches' rows,
samples and dropout masks must be drawn again exactly.
"""

import random
import signal

from pretrain_runs import STEPS, assert_same_state, common_args, run_to_end, run_until_step


def test_a_killed_two_replica_run_ends_equal_to_the_undisturbed_one(tmp_path, shards):
  extra = ["--strategy=mirrored", "--cpu_devices=2", "--gradient_accumulation_steps=2"]
  rng = random.Random()
  reference = tmp_path / "reference"
  result = run_to_end(common_args(reference, shards, *extra))
  assert result.returncode == 0, result.stderr[-3000:]

  run = tmp_path / "killed"
  args = common_args(run, shards, *extra)
  kill_at = rng.randrange(8, 24, 2)
  rc, out = run_until_step(args, kill_at, signal.SIGKILL, 0.1)
  assert rc == -signal.SIGKILL, out[-2000:]
  from electra_tf.training import resume

  readable = [step for step, prefix in resume.numbered(str(run / "checkpoints"))
              if resume.problem(prefix) is None]
  result = run_to_end(args)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"resumed from {run}/checkpoints/ckpt-{readable[0]} at step {readable[0]}" in (
      result.stdout), result.stdout[-2000:]
  assert f"step {STEPS}/{STEPS}" in result.stdout
  assert_same_state(str(reference / "checkpoints" / f"ckpt-{STEPS}"),
                    str(run / "checkpoints" / f"ckpt-{STEPS}"), f"killed at step {kill_at}")
