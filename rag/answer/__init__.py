"""Answers from a retrieved context: the LLM client, the embedded local LLM, readers and question generation.

May import `rag.retrieval` and the layers below it.
"""
