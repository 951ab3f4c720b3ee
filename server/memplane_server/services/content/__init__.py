"""What protects memory content: the content policy, applied to every write and run by admins."""
