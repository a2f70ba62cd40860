"""hpcguard: online resilience service for HPC clusters."""

__version__ = "0.1.0"
