"""Validation of ``gradient_noise_scale`` against a trusted reference (``python -m
benchmarks.noise_scale``); ``report.section`` renders its part of the results page.
"""
