"""TensorFlow → ONNX with tf2onnx, checked against TensorFlow, and cached by the model's content.

Three inputs, three tf2onnx routes (their tensor names differ, so nothing here hard-codes one):

- Keras file (``.keras``, ``.h5``/``.hdf5``): ``keras.models.load_model`` → ``tf2onnx.convert.from_keras``.
- SavedModel directory: ``tf2onnx.tf_loader.from_saved_model`` (one signature, ``serving_default``
  when present) → ``tf2onnx.convert.from_graph_def`` with the signature's names.
- Frozen GraphDef ``.pb``: needs ``--inputs``/``--outputs`` (a bare graph has no signature) →
  ``tf2onnx.tf_loader.from_graphdef`` → ``from_graph_def``.

Faithfulness: the converted graph and the *original* TensorFlow model (not tf2onnx's frozen copy) run
on the same seeded batch; the worst element decides pass / warn / fail. The ONNX file is written only
after the check passed, so a cache never holds an unfaithful conversion.

TensorFlow and tf2onnx are imported inside functions: importing this package is cheap and works
without them.

One idea per module: ``args`` (what the user names: the model's format, its content hash, the
``--inputs``/``--outputs`` tensor arguments), ``routes`` (TensorFlow access and the three tf2onnx
routes), ``check`` (the ONNX validation and the faithfulness check against TensorFlow), ``conversion``
(``convert_tf``: one conversion, checked, written) and ``cache`` (conversions cached by content).
Names are imported from the module that defines them; this file defines none.
"""
