"""The package's tests and the float64 references they compare against."""
