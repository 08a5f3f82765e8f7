"""One question in, one checked answer out: the engine, the one agent loop, each model's wire
format, the fallbacks, and every check an answer passes before a user sees it."""
