"""The statistics: latency summaries, the speedup verdict, throughput, latency targets (SLO)."""
