"""Export, import and rebuilding derived data from the records."""
