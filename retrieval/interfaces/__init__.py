"""The front doors: the command line (``cli``), the JSON API and web pages (``http``), the MCP tools (``mcp``), the
request checks they share (``service``) and what they print (``output``). Each is a thin layer over the library
functions of ``retrieval.commands`` and ``retrieval.search``; nothing below imports from here."""
