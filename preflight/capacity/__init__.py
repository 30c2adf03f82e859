"""Will a workload fit a GPU: memory estimates from measurements, and GPU planning."""
