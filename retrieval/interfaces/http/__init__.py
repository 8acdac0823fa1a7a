"""``retrieval serve``: the JSON API (``app``) and the web pages (``web``, ``svg``), FastAPI on uvicorn. Needs the
``serve`` extra (``pip install 'retrieval[serve]'``)."""
