"""Many nodes at once: reading reports and snapshots (files, folders, streams, serve endpoints) in worker
processes, folding node lists as Slurm does, and the fleet's summary, ranked failures, drift and matrix."""
