"""Entry point of ``python -m benchmarks.time_to_result``."""

from benchmarks.time_to_result import cli

if __name__ == "__main__":
  cli.main()
