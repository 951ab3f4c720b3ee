"""SQL of what protects memory content: the content policies."""
