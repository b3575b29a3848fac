"""Developer tools that are neither tests nor benchmarks."""
