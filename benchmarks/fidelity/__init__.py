"""Fidelity: each plugin's verdicts against the official scorer's, run unmodified on the same outputs."""
