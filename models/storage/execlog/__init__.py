"""The execution log's rows, its episodes, the projection watermark and redaction."""
