"""Quality control of generated evidence, and the human-evaluation loop that checks it."""
