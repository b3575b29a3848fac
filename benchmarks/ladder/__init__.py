"""The ladder: VSGD-Muon against AdamW, Muon, NorMuon and Muon-VS across model sizes and data.

``protocol`` declares it (``benchmarks/results/ladder/PROTOCOL.md`` in words);
``python -m benchmarks.ladder`` runs its rungs into the ledger
``benchmarks/results/ladder/runs.jsonl``, one line a run.
"""
