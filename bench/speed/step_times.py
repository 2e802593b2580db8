r"""Per-step wall and CPU time of ours' pretraining step, to see stalls of the machine.

  python bench/speed/step_times.py --precision=mixed_bfloat16 --steps=12

Runs the small preset on pretrain_step.py's synthetic batch, one Keras fit call per step,
and prints each step's wall time beside the CPU time the process used in it. On the 2-core
VM of 2026-11-23 the wall times were bimodal (about 1.7 s or exactly 2.56 s in bfloat16)
while the CPU time stayed the same: in the slow steps the process was waiting, not working.
The wait came from deleting each fit call's tf.data iterator with autotuning on;
build_ours' dataset now has it off (pretrain_step.synthetic_dataset), and the steps are
no longer bimodal.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="small")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--precision", default="mixed_bfloat16")
  parser.add_argument("--steps", type=int, default=12)
  args = parser.parse_args()
  from step_lib import build_ours

  from electra_tf import presets

  config = presets.get(args.preset).replace(batch_size=args.batch_size,
                                            precision=args.precision)
  model, dataset = build_ours(config, xla=False, per_call=1)
  model.fit(dataset, steps_per_epoch=1, epochs=1, verbose=0)  # tracing
  walls = []
  for step in range(args.steps):
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    model.fit(dataset, steps_per_epoch=1, epochs=1, verbose=0)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    walls.append(wall)
    print(f"step {step + 1}: wall {wall:.3f} s, cpu {cpu:.2f} s ({cpu / wall:.2f} cores)",
          flush=True)
  print(f"median {statistics.median(walls):.3f} s, fastest {min(walls):.3f} s, slowest "
        f"{max(walls):.3f} s")


if __name__ == "__main__":
  main()
