"""Validation of ``gradient_noise_scale`` against a trusted reference (``python -m
benchmarks.noise_scale``): ``protocol`` declares what it runs, ``run`` trains and
measures through the one runner (``benchmarks.study_runner``); the reporting
(``benchmarks.reporting.noise_scale``) plots and renders its part of the results page
from the JSON.
"""
