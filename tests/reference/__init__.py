"""Frozen copies of code the package replaced, kept as bit-for-bit references and timing baselines."""
