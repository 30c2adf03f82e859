"""Live probes, each bounded by a deadline: NVML (the one door to the driver) or its replayed recording, the host,
the container, the kernel log, the job's interpreter (inspected without importing torch), torch's architectures, and
the active test's worker."""
