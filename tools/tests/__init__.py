"""The tools' own tests, outside the package's suite: .ci/paperwork and .ci/mutants run them."""
