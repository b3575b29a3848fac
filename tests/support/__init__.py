"""What the tests share: the float64 reference, the golden states and common inputs."""

import os

# The repository's root: the tests start the trainer and read committed files from it.
REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
