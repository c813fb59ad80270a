"""Measuring: THE timing loop, interleaved loads and rounds, worker processes, bench, results, simulations."""
