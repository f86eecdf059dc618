"""The recipes run as a reader runs them: torchrun, the TensorFlow programs, Slurm."""
