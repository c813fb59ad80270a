"""Mixed-precision *training* verdicts: one training step (forward + loss + backward + optimizer step)
measured as a runner, so compare's interleaved loop, timing and statistics measure it unchanged.

Modules: ``step`` (the arms and the PyTorch step runner), ``memory`` (peak memory, largest batch),
``reasons`` (why a precision is or is not faster: kernel dtypes, casts, GradScaler, optimizer,
launch-bound, tensor-core eligibility), ``keras`` (the same for a Keras model), ``run`` (the whole
comparison and its JSON), ``page`` (Markdown and HTML).
"""
