"""The trainer's errors: each ends a run in one line that says what was wrong
and what would be right.

``TrainerError`` and its kinds refuse a run before it trains (the command
exits 2); callers that treat one kind apart, such as the Table 1 protocol
leaving a workdir to the trainer that holds it, catch that kind, never match
message text. ``TrainingStopped`` ends a run that had begun (exit 1).
"""


class TrainerError(Exception):
  """A run refused at its start: bad settings or data, or a resource it cannot have."""


class ConfigError(TrainerError):
  """Settings, data or a workdir that the run cannot use."""


class WorkdirInUse(TrainerError):
  """Another live trainer holds the workdir's lock."""


class PortInUse(TrainerError):
  """The coordinator's port of a multi-process run is taken on this host."""


class TrainingStopped(Exception):
  """The run cannot go on (a non-finite loss or update, a failed save); the message
  says why.
  """


class Diverged(TrainingStopped):
  """A step's loss or update is not finite: a rerun would stop at the same step.

  A failed save is a ``TrainingStopped`` but no ``Diverged``: once the disk
  is mended, a rerun resumes from the last checkpoint.
  """


def first_line(err: BaseException) -> str:
  """The first line of an error's message, or its type's name if it has none."""
  text = str(err).strip()
  return text.splitlines()[0] if text else type(err).__name__
