"""The original model code of each converter recipe, as its authors wrote it (used only by tests).

keras_seq2seq            the Keras example "English-to-Spanish translation with a sequence-to-sequence
                         Transformer" (keras.io/examples/nlp/neural_machine_translation_with_transformer),
                         its Keras 3 form
keras_seq2seq_handwritten the widely copied notebook variant of it with a hand-written MultiHeadAttention
tf_tutorial              the TensorFlow tutorial "Neural machine translation with a Transformer and
                         Keras" (tensorflow.org/text/tutorials/transformer)
keras_from_scratch       the "Transformer from scratch" English-to-French notebook this project grew
                         from (../shared/seeds/002): its data pipeline, model, training cell and
                         decode_sequence, verbatim (tests/from_scratch_run.py runs it end to end)
tf_keras_seq2seq         the Keras example's model written with tf_keras (TF 2.x, Keras 2), which is
                         what ModelCheckpoint(save_weights_only=True) checkpoints come from

Only the model classes and how the model is assembled are reproduced (no data pipeline, no training
loop), but for keras_from_scratch, whose pipeline and loops are what its users run; each module has
`build_*` helpers that assemble the model exactly as the original does.
"""
