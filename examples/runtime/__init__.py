"""The operation of a run: its workdir and checkpoints, its processes, graceful
stops, batches and progress reports.
"""
