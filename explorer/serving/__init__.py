"""What serving the app to many visitors needs, whatever the tab: who may do what (access), the limits on heavy
work, cancellation, the bounded per-visitor sessions, the GPU choice, the warm-up and the log destination."""
