"""Communication plans: the model, the builders per family, the checker and tools."""
