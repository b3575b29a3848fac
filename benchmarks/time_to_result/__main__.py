"""Entry point of ``python -m benchmarks.time_to_result``."""

from benchmarks.time_to_result import protocol

if __name__ == "__main__":
  protocol.main()
