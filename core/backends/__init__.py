"""Where passages and state live: `sqlite` on one machine, `elasticsearch` for a deployment.
Each exposes one `Backend` (`core.ports.Backend`); they know nothing of each other."""
