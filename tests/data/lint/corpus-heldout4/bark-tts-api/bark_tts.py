"""Bark generation helpers (semantic -> coarse -> fine tokens, decoded with Vocos)."""
GEN_TEMP = 0.6
WAV_TEMP = 0.7
