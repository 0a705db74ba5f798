"""Text analysis every method shares: sentences with character offsets, words, stop words, term folding, tables.

The lowest layer: imports nothing from `rag`.
"""
