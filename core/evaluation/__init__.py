"""Measuring the bot on BEIR-layout datasets: retrieval metrics, answer grading, whole runs."""
