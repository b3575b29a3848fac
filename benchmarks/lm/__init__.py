"""The language-model toolkit every LM study shares, outside any one study.

``model`` is the pre-LN char transformer in plain JAX, ``corpus`` the pinned
wheels' Python source read as characters (the contest's Django split and the
ladder's ten-wheel corpus), ``train`` the two compiled training loops (the
contest's and the ladder's), ``normuon`` and ``muon_vs`` the two peers optax
lacks. A study declares its sizes, its grid and its rules, and calls these.
"""
