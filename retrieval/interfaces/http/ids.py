"""The convertor of a paper id in a route's path (``/papers/{paper_id:id}``): Starlette's ``path``, which takes
``/`` (``hep-th/9711200``), but whose ``.*`` stops at a line break: an id with a decoded ``%0A`` matched no route
and was a bare "Not Found" instead of the message that names the id."""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

#: The convertor's name in a route's path.
ID = "id"


class IdConvertor(Convertor):
    """Any text, line breaks included, taken as it was decoded."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return str(value)


register_url_convertor(ID, IdConvertor())
