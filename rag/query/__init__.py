"""What callers use: a `Workspace` bound once, and the registry of retrieval methods (LongRAG, ELITE, hybrid).

The CLI, the HTTP server, the assets and the evaluation all enter here. May import every layer but `rag.evaluation`.
"""
