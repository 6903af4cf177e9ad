"""The explorer: the dynamics and the trained classifiers in a browser (`hardmax explore`).

    assets.py     STATIC: the folder of the pages' files (package data)
    requests.py   Limits, and the JSON requests validated into library arguments (RequestError: HTTP 4xx)
    views.py      what the pages show, computed by library calls only (simulate, make_scene, check_theorem,
                  explain_text, project_review, layer_rates, the Att-SVM selection, CRATE's measures)
    server.py     the Starlette app (JSON API + static pages) and uvicorn
    network.py    the listening socket, the Host names answered, deadlines on slow clients, the connection cap
    export.py     standalone HTML (assets inlined, data embedded): the Export button and notebooks (`view`)
    static/       the pages' HTML, JavaScript and CSS: package data, no CDN, no third-party script

The pages draw; they never compute the dynamics. Why this stack: docs/explore.md.
"""

from hardmax.explore.export import View, standalone_html, view
from hardmax.explore.requests import Limits, RequestError
from hardmax.explore.server import create_app, find_runs

__all__ = ["Limits", "RequestError", "View", "create_app", "find_runs", "standalone_html", "view"]
