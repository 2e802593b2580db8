"""Tiny: a ~2M-parameter model that trains on a laptop CPU in minutes (tests and the demo).

Peak LR 1e-4, not ELECTRA_SPEC's 5e-4 (measured on the built-in corpus, batch 8 x 64):
at 5e-4 the 64-wide, 2-layer discriminator stops finding replacements once the generator
has learned word frequencies (AUC 0.86 at step 200, 0.57 at step 5000); at 1e-4 it stays
at AUC 0.82-0.88 through step 2000 while the generator learns. Longer tiny runs decline at
1e-4 too: the miniature lacks the capacity to judge frequent words from context.
Pass --learning_rate=5e-4 for the spec value. Warmup is 200 steps (spec: 10,000) to fit
the 2,000-step demo.
"""

from electra_tf.config import EncoderConfig, PretrainConfig

CONFIG = PretrainConfig(
    model=EncoderConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256,
                        embedding_size=32),
    generator_fraction=0.25,
    max_seq_length=64,
    mask_prob=0.15,
    batch_size=8,
    learning_rate=1e-4,
    num_train_steps=2000,
    warmup_steps=200,
    steps_per_execution=50,
    checkpoint_steps=500,
    log_steps=200,
)
