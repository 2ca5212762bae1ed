"""Workloads, Grid-style scenarios, Spark jobs and plots that reproduce the paper's figures."""
