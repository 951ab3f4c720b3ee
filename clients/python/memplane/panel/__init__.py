"""`memplane panel`: an inspector web UI that is a client of a running Memplane through the Python
SDK, with the API key its visitor signed in with, so a visitor sees exactly what that key may see.

Where the key lives: in a server-side session (sessions.py), referenced by a random id in an
HttpOnly, SameSite=Strict cookie. Kept in the browser instead (sent with each request), any script
that ran in the page, e.g. through a hole in escaping memory content, could read it and take it
away; an HttpOnly cookie's value is out of reach of the page, and a session id is worthless once
the visitor signs out or it idles out. Every request makes its own SDK client from its session's
key and closes it after, so nothing one visitor opened is ever used for another.

Modules: sessions (who is signed in), guard (session lookup, CSRF and origin checks, security
headers), render (templates and display filters), auth (sign in / out), pages (read-only views),
actions (forget, correct, resolve: each confirmed first), live (server-sent events from Watch),
app (routes and error pages), server (the HTTP server), command (`memplane panel`, `memplane-panel`,
`python -m memplane.panel`; needs the panel extra).
"""
