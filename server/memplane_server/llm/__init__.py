"""Embedders and LLM prompts."""
