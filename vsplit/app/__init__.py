"""The party application (align, plan, train, score), written once and driven by both runtimes."""
