"""The dashboard of workflow versions: server-rendered pages on the API's FastAPI app.

`dashboard_router(service)` gives the routes; `flowmem.server.api.create_app` includes them,
so `flowmem dashboard` and `flowmem api` serve the same app.
"""

from flowmem.server.dashboard.routes import dashboard_router

__all__ = ["dashboard_router"]
