"""The one feature-key contract shared by data, model, training, tasks and serving."""

INPUT_IDS = "input_ids"  # int32 [B, L] WordPiece ids, 0 = [PAD]
INPUT_MASK = "input_mask"  # int32 [B, L] 1 for real tokens, 0 for padding
SEGMENT_IDS = "segment_ids"  # int32 [B, L] 0 for segment A, 1 for segment B
MASKED_INPUT_IDS = "masked_input_ids"  # int32 [B, L] input_ids after masking (generator input)
MASKED_LM_POSITIONS = "masked_lm_positions"  # int32 [B, P] positions chosen for masking
MASKED_LM_IDS = "masked_lm_ids"  # int32 [B, P] original ids at those positions
MASKED_LM_WEIGHTS = "masked_lm_weights"  # float32 [B, P] 1.0 real prediction, 0.0 padding

# What a TFRecord stores (int64 in tf.Example, cast to int32 on read).
RECORD_KEYS = (INPUT_IDS, INPUT_MASK, SEGMENT_IDS)
# What the pretraining pipeline yields per batch.
PRETRAIN_KEYS = RECORD_KEYS + (MASKED_INPUT_IDS, MASKED_LM_POSITIONS, MASKED_LM_IDS,
                               MASKED_LM_WEIGHTS)
