"""HTTP plumbing under everything: the connection pool, streamed bodies, SSE, URL checks."""
