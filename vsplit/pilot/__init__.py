"""The scripted cross-organization pilot: prepare party folders, start one process per party, report."""
