"""The machine: CUDA wrappers, NVML, environment records, noise, energy, memory and preflight checks."""
