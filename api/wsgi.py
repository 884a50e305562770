"""The WSGI entry point for gunicorn: ``gunicorn api.wsgi:app``.

Each worker builds its app here. ``pitboss serve`` resolves the database once beforehand and
hands it to the workers as ``DATABASE_URL``, so the embedded server is started only once.
"""

from __future__ import annotations

import logging
import os

from api.app import create_app
from api.secrets_files import load_shoe_key


def _log_through_gunicorn() -> None:
    # Under gunicorn the root logger has no handler; reuse gunicorn's so that the
    # application's INFO lines (which database is in use) reach the same stream.
    gunicorn_logger = logging.getLogger("gunicorn.error")
    pitboss_logger = logging.getLogger("pitboss")
    if gunicorn_logger.handlers and not pitboss_logger.handlers:
        pitboss_logger.handlers = list(gunicorn_logger.handlers)
        pitboss_logger.setLevel(gunicorn_logger.level)
        pitboss_logger.propagate = False


_log_through_gunicorn()
# The shoe key now, so a worker without it fails to boot instead of failing the first deal.
app = create_app({"SHOE_KEY": load_shoe_key(os.environ)})
