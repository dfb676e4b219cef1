"""Embedders (sentence-transformers, ONNX Runtime) and the vectors computed with them."""
