"""Libraries of the commands that plug preflight into other systems: Slurm, a container entrypoint, serve."""
