"""From a failed run\x27s log to the cause and the fix."""
