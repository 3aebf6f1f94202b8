"""Bundled data sets and their loaders (imported as ``vsplit.datasets``)."""
