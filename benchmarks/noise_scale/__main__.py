"""``python -m benchmarks.noise_scale [--quick] [--out FOLDER]``."""

from benchmarks.noise_scale import run

if __name__ == "__main__":
  run.main()
