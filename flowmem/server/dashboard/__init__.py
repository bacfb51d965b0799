"""The dashboard of workflow versions: server-rendered pages on the API's FastAPI app.

`add_dashboard(app, service)` adds the pages (and their HTML error pages) to an app;
`flowmem.server.api.create_app` calls it, so `flowmem dashboard` and `flowmem api` serve the
same app.
"""

from flowmem.server.dashboard.routes import add_dashboard

__all__ = ["add_dashboard"]
