"""ELECTRA-Large (335M discriminator parameters): batch 2048 across hosts, so LAMB by default.

The authors trained Large with AdamW; LAMB is the large-batch choice for a multi-host or
TPU run. Pass --optimizer=adamw for theirs.
"""

from electra_tf.config import EncoderConfig, PretrainConfig

CONFIG = PretrainConfig(
    model=EncoderConfig(hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096,
                        embedding_size=1024),
    generator_fraction=0.25,
    max_seq_length=512,
    mask_prob=0.25,
    batch_size=2048,
    learning_rate=2e-4,
    num_train_steps=400_000,
    warmup_steps=10_000,
    optimizer="lamb",
)
