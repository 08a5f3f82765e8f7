"""Values and pure rules shared by every part of the core: no I/O, nothing to configure."""
