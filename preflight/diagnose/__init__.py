"""From a failed run's log to the cause and the fix."""
