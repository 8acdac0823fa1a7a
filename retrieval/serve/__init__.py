"""The index as a service: ``retrieval serve`` (a JSON API and web pages, FastAPI on uvicorn) and ``retrieval mcp``
(Model Context Protocol tools over stdio), both over ``retrieval.serve.service``. Needs the ``serve`` extra
(``pip install 'retrieval[serve]'``)."""
