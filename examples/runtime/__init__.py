"""The operation of a run: its guard, workdir, checkpoints and final record, its
processes, graceful stops, batches and progress reports.
"""
