"""Watch: the caller's visible changes streamed from one change-log reader per process."""
