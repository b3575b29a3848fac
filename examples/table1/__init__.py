"""The paper's Table 1 protocol: ``python -m examples.table1 --table cifar100``.

``grid`` holds the columns and every run of the grid, ``table`` the table
built from the runs' final records (``runtime/workdirs.py``), and ``reproduce``
the command that runs the grid and writes the table.
"""
