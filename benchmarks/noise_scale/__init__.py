"""Validation of ``gradient_noise_scale`` against a trusted reference (``python -m
benchmarks.noise_scale``): ``run`` trains and measures, ``report`` plots and renders
its part of the results page from the JSON, and ``plan`` holds what both need (the
workloads, the results folder, the phases of a run).
"""
