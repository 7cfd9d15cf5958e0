"""One training loop for every objective: devices, AMP, DDP, schedules, checkpoints, resume, logging."""
