"""Turning text into rankings: the embedder and its cache, our RRF, and the hybrid search
skeleton every backend runs."""
