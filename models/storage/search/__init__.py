"""What recall reads: candidates, the row cache, exact vector search, full text, neighbours."""
