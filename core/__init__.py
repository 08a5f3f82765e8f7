"""The engine, platform-free. Packages by concern, each importing only those to its right:
evaluation > answer > learning | ingest | backends > search > ports > domain > errors
(checked by import-linter; see ARCHITECTURE.md)."""
