"""The local web console (``minikafka ui``): server-rendered pages over one ledger.

Between ``pipelines`` and ``cli`` in the layers: it reads through ``minikafka.ledger``'s
functions (in short read transactions) and acts through the library calls the CLI makes.
Needs the ``ui`` extra (starlette, uvicorn, jinja2). ``create_app`` builds the ASGI app,
``serve`` runs it.
"""

from __future__ import annotations
