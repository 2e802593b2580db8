"""Text -> WordPiece ids -> TFRecords -> masked pretraining batches (tf.text + tf.data)."""
