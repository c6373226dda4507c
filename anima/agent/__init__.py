"""What an agent runtime calls: turn assembly, the tool registry, the short-term-memory tool, and `demo`."""
