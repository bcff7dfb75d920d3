"""The project's version. Every image copies common/ whole, so every service carries it: the image service
reports it in `GET /v1/info`, the LLM gateway in its `/health` body. pyproject.toml and CHANGELOG.md's newest
release name the same (tests/common/test_version.py)."""

from typing import Final

VERSION: Final = "0.2.0"
