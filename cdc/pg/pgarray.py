"""PostgreSQL's array text output (``{1,2,NULL}``, ``{"a b","x\\"y"}``) into Python lists."""

from __future__ import annotations


class ArrayLiteralError(ValueError):
    """Not a one-dimensional array literal with the default lower bound."""


def parse(text: str) -> list[str | None]:
    """The elements of a one-dimensional array literal as text; unquoted NULL is None.

    Refused (a Spark array could not hold them): explicit bounds (``[0:1]={1,2}``: PostgreSQL
    writes them only when a lower bound is not 1) and nested (multi-dimensional) arrays.
    """
    if text.startswith("["):
        raise ArrayLiteralError(f"an array with explicit bounds: {text[:40]!r}")
    if len(text) < 2 or text[0] != "{" or text[-1] != "}":
        raise ArrayLiteralError(f"not an array literal: {text[:40]!r}")
    body = text[1:-1]
    out: list[str | None] = []
    if not body:
        return out
    i, n = 0, len(body)
    while True:
        if i < n and body[i] == "{":
            raise ArrayLiteralError("multi-dimensional arrays are not supported")
        if i < n and body[i] == '"':
            i += 1
            chars: list[str] = []
            while i < n and body[i] != '"':
                if body[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(body[i])
                i += 1
            if i >= n:
                raise ArrayLiteralError("unterminated quoted element")
            i += 1
            out.append("".join(chars))
        else:
            start = i
            while i < n and body[i] != ",":
                i += 1
            word = body[start:i].strip()
            out.append(None if word.upper() == "NULL" else word)
        if i >= n:
            return out
        if body[i] != ",":
            raise ArrayLiteralError(f"expected ',' at {i} in {text[:40]!r}")
        i += 1
